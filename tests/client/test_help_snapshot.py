"""Every `--help` page of `yoyaku`, and what it answers to usage mistakes and malformed ids,
byte for byte, against snapshots taken from the command line as it was written before its
commands were split into one module per group: the split changed no command, option, help
text, message or exit code.

`python -m tests.client.test_help_snapshot` rewrites the snapshots from the code it imports
(only for a deliberate change of the command line).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from yoyaku_client.cli import cli

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = Path(__file__).with_name("help_snapshot.json")
MISTAKES_SNAPSHOT = Path(__file__).with_name("mistakes_snapshot.json")
#: The text width of an 80-column terminal, and of one of 100 columns or more (the group's
#: max_content_width): click writes help two columns narrower than the terminal.
WIDTHS = (78, 98)
EXPECTED: dict[str, dict[str, object]] = (
    json.loads(SNAPSHOT.read_text()) if SNAPSHOT.exists() else {}
)


def _command_paths(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [path]
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):
            found = command.get_command(context, name)
            assert found is not None, name
            paths += _command_paths(found, (*path, name))
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
    assert len(EXPECTED) == len(WIDTHS) * 44  # 43, then `rescore`


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


# Answered before any request: usage errors, and ids refused as malformed or too short.
MISTAKES = [
    ["--version"],
    ["nope"],
    ["review", "nope"],
    ["submit"],
    ["cancel"],
    ["cancel", "x\x1b[31m"],
    ["release", "--json"],
    ["jobs", "--status", "bad"],
    ["review", "claim"],
    ["review", "claim", "ab"],
    ["review", "extend", "abc?x", "--json"],
    ["review", "release", "0123/", "--json"],
    ["review", "regrade", "12"],
    ["review", "complete", "0123456789abcdef0123456789abcdef"],
    ["schedule", "show", "zz", "--json"],
    ["schedule", "cancel"],
    ["schedule", "book", "--at", "+1h"],
    ["token", "revoke"],
    ["login", "--url", "ftp://example.org"],
    ["submit", "examples/hello", "--metadata", "[1]"],
    ["submit", "examples/hello", "--challenge", "digits"],
    ["submit", "examples/hello", "--challenge", "digits", "--phase", "dev", "--question", "q"],
    ["leaderboard", "--challenge", "digits"],
    ["challenge", "show"],
    ["challenge", "push", "examples/hello"],
    ["team", "join", "abc"],
    ["final", "select"],
]


def mistakes(config_dir: Path) -> dict[str, dict[str, object]]:
    """`python -m yoyaku_client ARGS` for each of MISTAKES: exit code, stdout and stderr."""
    env = {
        "PATH": str(Path(sys.executable).parent),
        "COLUMNS": "80",
        "YOYAKU_URL": "http://127.0.0.1:9",
        "YOYAKU_TOKEN": "t",
        "YOYAKU_RETRIES": "0",
        "YOYAKU_CONFIG_DIR": str(config_dir),
    }
    if "PYTHONPATH" in os.environ:  # the snapshot is written from another checkout's code
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    answers: dict[str, dict[str, object]] = {}
    for args in MISTAKES:
        done = subprocess.run(
            [sys.executable, "-m", "yoyaku_client", *args],
            capture_output=True,
            text=True,
            check=False,
            env=env,
            cwd=ROOT,
        )
        answers[json.dumps(args)] = {
            "exit_code": done.returncode,
            "stdout": done.stdout,
            "stderr": done.stderr,
        }
    return answers


def test_mistakes_are_answered_byte_for_byte_as_before(tmp_path: Path) -> None:
    expected = json.loads(MISTAKES_SNAPSHOT.read_text())
    assert mistakes(tmp_path) == expected
    assert all(answer["exit_code"] in (0, 2) for answer in expected.values())


if __name__ == "__main__":
    import tempfile

    SNAPSHOT.write_text(json.dumps(help_pages(), indent=1, sort_keys=True) + "\n")
    with tempfile.TemporaryDirectory() as folder:
        text = json.dumps(mistakes(Path(folder)), indent=1, sort_keys=True)
    MISTAKES_SNAPSHOT.write_text(text + "\n")
