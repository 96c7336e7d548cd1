"""A line for a pipe or a file is written without rich, as rich would have written it; the
command line's modules load no rich (a table or a terminal loads it when it is needed)."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from rich.console import Console

from yoyaku_client.output import Output, plain

SAMPLES = [
    "hello",
    "",
    "a\tb\tc",
    "trailing   ",
    "x" * 400,
    "two\nlines\tand a tab",
    "[bold]x[/bold] :smile:",
    "\u00e9\u4e2d\u6587",
    "a\r\nb\rc",
    "\x1b[31mred\x9b2J \u202egnp.py",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_a_line_for_a_pipe_is_what_rich_writes(text: str) -> None:
    stdout, stderr = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = stdout, stderr
    try:
        output = Output()
        output.print(text, style="green")
        output.message(text)
        output.warning(text)
        output.error(text)
        output.note(text, style="dim")
    finally:
        sys.stdout, sys.stderr = saved
    expected = {}
    for name, prefix, style in (
        ("print", "", "green"),
        ("message", "", None),
        ("warning", "Warning: ", "yellow"),
        ("error", "Error: ", "bold red"),
        ("note", "", "dim"),
    ):
        buffer = io.StringIO()
        console = Console(file=buffer, width=160, soft_wrap=True, highlight=False, emoji=False)
        console.print(plain(prefix + text), style=style)
        expected[name] = buffer.getvalue()
    assert stdout.getvalue() == expected["print"]
    assert stderr.getvalue() == "".join(
        expected[n] for n in ("message", "warning", "error", "note")
    )


def test_the_command_line_loads_no_rich() -> None:
    code = "import sys, yoyaku_client.cli; print(sorted(m for m in sys.modules if 'rich' in m))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
