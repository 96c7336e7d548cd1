"""The console script ends its process without the interpreter's shutdown (`end_process`):
everything written is still delivered, whole and in order, and the exit code is the one the
command chose; a caller that passes `argv` still gets `SystemExit`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from yoyaku_client.cli import main

ROOT = Path(__file__).resolve().parents[2]

# More than a pipe holds (64 KiB), so the writer blocks until the reader drains it, then a short
# tail that stays in the buffers of `sys.stdout` / `sys.stderr` (buffered: no
# PYTHONUNBUFFERED), which a bare `os._exit` drops.
PROGRAM = """
import sys, threading
from yoyaku_client.cli import end_process
sys.stdout.write("o" * 300_000)
sys.stdout.write("end-of-stdout")  # a short write stays in the buffer
sys.stderr.write("e" * 100_000)
sys.stderr.write("end-of-stderr")
code = sys.argv[1]
end_process(SystemExit(None if code == "none" else int(code)))
"""


def buffered_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def run(*args: str, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, *args],
        env=buffered_env(),
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )


@pytest.mark.parametrize(("code", "status"), [("0", 0), ("3", 3), ("130", 130), ("none", 0)])
def test_every_byte_written_arrives_and_the_exit_code_is_kept(code: str, status: int) -> None:
    done = run(code)
    assert done.returncode == status
    assert done.stdout == "o" * 300_000 + "end-of-stdout"
    assert done.stderr == "e" * 100_000 + "end-of-stderr"


def test_output_to_a_file_is_flushed_too(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    with target.open("w") as handle:
        done = run("4", stdout=handle.fileno())
    assert done.returncode == 4
    assert target.read_text() == "o" * 300_000 + "end-of-stdout"


def test_a_message_exit_is_left_to_python() -> None:
    program = "from yoyaku_client.cli import end_process\nend_process(SystemExit('gone'))"
    done = subprocess.run(
        [sys.executable, "-c", program],
        env=buffered_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == "gone"


def test_main_with_argv_raises_system_exit_in_the_callers_process() -> None:
    with pytest.raises(SystemExit) as raised:
        main(["--version"])
    assert raised.value.code == 0
    with pytest.raises(SystemExit) as raised:
        main(["job"])  # a usage error: exit 2, and this process is still running
    assert raised.value.code == 2
