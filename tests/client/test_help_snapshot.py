"""Every `--help` page of `yoyaku`, byte for byte, against a snapshot taken from the command
line as it was written before its commands were split into one module per group: the split
changed no command, option, help text or exit code.

`python -m tests.client.test_help_snapshot` rewrites the snapshot from the code it imports
(only for a deliberate change of the command line).
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from yoyaku_client.cli import cli

SNAPSHOT = Path(__file__).with_name("help_snapshot.json")
#: The text width of an 80-column terminal, and of one of 100 columns or more (the group's
#: max_content_width): click writes help two columns narrower than the terminal.
WIDTHS = (78, 98)
EXPECTED: dict[str, dict[str, object]] = (
    json.loads(SNAPSHOT.read_text()) if SNAPSHOT.exists() else {}
)


def _command_paths(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [path]
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            paths += _command_paths(command.commands[name], (*path, name))
    return paths


@functools.cache
def help_pages() -> dict[str, dict[str, object]]:
    """`yoyaku [COMMAND...] --help` at each width: its exit code and output."""
    pages: dict[str, dict[str, object]] = {}
    for width in WIDTHS:
        runner = CliRunner()
        for path in _command_paths(cli):
            result = runner.invoke(cli, [*path, "--help"], prog_name="yoyaku", terminal_width=width)
            pages[f"{width}: yoyaku {' '.join(path)}".rstrip()] = {
                "exit_code": result.exit_code,
                "output": result.output,
            }
    return pages


def test_the_snapshot_names_every_command_of_the_split_command_line() -> None:
    assert sorted(help_pages()) == sorted(EXPECTED)
    assert len(EXPECTED) == len(WIDTHS) * 32


@pytest.mark.parametrize("page", sorted(EXPECTED))
def test_help_page_is_byte_identical_to_the_snapshot(page: str) -> None:
    assert help_pages()[page] == EXPECTED[page]


def test_the_console_script_and_python_m_print_the_same_help() -> None:
    by_module = subprocess.run(
        [sys.executable, "-m", "yoyaku_client", "review", "--help"],
        capture_output=True,
        text=True,
        check=False,
        env={"COLUMNS": "80", "PATH": str(Path(sys.executable).parent)},
    )
    script = Path(sys.executable).parent / "yoyaku"
    by_script = subprocess.run(
        [str(script), "review", "--help"],
        capture_output=True,
        text=True,
        check=False,
        env={"COLUMNS": "80", "PATH": str(Path(sys.executable).parent)},
    )
    expected = EXPECTED["78: yoyaku review"]
    assert (by_module.returncode, by_module.stdout) == (expected["exit_code"], expected["output"])
    assert (by_script.returncode, by_script.stdout) == (expected["exit_code"], expected["output"])


if __name__ == "__main__":
    SNAPSHOT.write_text(json.dumps(help_pages(), indent=1, sort_keys=True) + "\n")
