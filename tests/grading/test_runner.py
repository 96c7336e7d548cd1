"""The compiled runner (`apps/grading/isolation/runner.c`) against the shell runner it replaces:
the same limits, the same report for every kind of result, the same copy of many files and the
same output folder; unlike the shell, the program cannot reach its memory or its result
channel; its `launch` leaves a root worker's sandbox no privilege on the host; and a cache
folder that another uid could write is never used."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from apps.grading.isolation import (
    BUBBLEWRAP,
    Limits,
    Outcome,
    input_folder,
    input_folder_hand_over,
    isolation_probe,
    run_program,
)
from apps.grading.isolation import run as isolation_run
from apps.grading.isolation import runner as runner_module
from apps.grading.isolation.runner import runner_binary

PYTHON = "/usr/bin/python3"
LIMITS = Limits(
    wall_seconds=20,
    cpu_seconds=7,
    memory_bytes=512 * 1024**2,
    file_bytes=3 * 1024**2,
    scratch_bytes=8 * 1024**2,
    processes=24,
    open_files=100,
)
RLIMITS = """
import resource
names = ("CPU", "AS", "FSIZE", "NPROC", "NOFILE", "CORE")
print([resource.getrlimit(getattr(resource, "RLIMIT_" + name)) for name in names])
"""
PROGRAMS = {
    "limits and metrics": RLIMITS + "open('metrics.json', 'w').write('{\"score\": 3}')\n",
    "a link": "import os\nos.symlink('/etc/passwd', 'metrics.json')\n",
    "a fifo": "import os\nos.mkfifo('metrics.json')\n",
    "a folder": "import os\nos.mkdir('metrics.json')\n",
    "none, exit 3": "print('bye')\nraise SystemExit(3)\n",
    "too large": "open('metrics.json', 'w').write('1' * (1024 * 1024 + 10))\n",
    "killed": "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n",
    "a survivor": (
        "import os, time\nif os.fork() == 0:\n    time.sleep(1)\n"
        "    open('metrics.json', 'w').write('{\"score\": 9}')\n    os._exit(0)\n"
        "open('metrics.json', 'w').write('{\"score\": 1}')\n"
    ),
}


@pytest.fixture
def bwrap() -> str:
    probe = isolation_probe(PYTHON)
    if probe.isolation != BUBBLEWRAP or probe.bwrap is None:
        if os.environ.get("YOYAKU_REQUIRE_BUBBLEWRAP"):
            pytest.fail(f"bubblewrap is required here: {probe.reason}")
        pytest.skip(f"no bubblewrap isolation on this machine: {probe.reason}")
    if runner_binary() is None:
        if os.environ.get("YOYAKU_REQUIRE_BUBBLEWRAP"):
            pytest.fail("the compiled runner is required here (cc and a static C library)")
        pytest.skip("no C compiler here: only the shell runner runs")
    return probe.bwrap


def _run(bwrap: str, files: dict[str, str], *, compiled: bool, **options: object) -> Outcome:
    with input_folder() as root:
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        input_folder_hand_over(root, isolation=BUBBLEWRAP)
        saved = getattr(isolation_run, "runner_binary")  # noqa: B009 - swapped back below
        if not compiled:
            setattr(isolation_run, "runner_binary", lambda: None)  # noqa: B010
        try:
            return run_program(
                isolation=BUBBLEWRAP,
                bwrap=bwrap,
                input_dir=root,
                program=["main.py"],
                limits=LIMITS,
                python=PYTHON,
                **options,  # type: ignore[arg-type]
            )
        finally:
            setattr(isolation_run, "runner_binary", saved)  # noqa: B010


def _same(compiled: Outcome, shell: Outcome) -> None:
    assert dataclasses.replace(compiled, wall_seconds=0) == dataclasses.replace(
        shell, wall_seconds=0
    )


@pytest.mark.parametrize("kind", sorted(PROGRAMS))
def test_both_runners_report_the_same(bwrap: str, kind: str) -> None:
    files = {"main.py": PROGRAMS[kind]}
    compiled = _run(bwrap, files, compiled=True)
    _same(compiled, _run(bwrap, files, compiled=False))
    if kind == "limits and metrics":
        assert compiled.metrics == b'{"score": 3}'
        hard_and_soft = [[7, 7], [512 * 1024**2] * 2, [3 * 1024**2] * 2, [24, 24], [100, 100]]
        assert compiled.logs == str([tuple(pair) for pair in [*hard_and_soft, [0, 0]]]) + "\n"
    if kind == "a survivor":  # killed before the report: the forged score never lands
        assert compiled.metrics == b'{"score": 1}'


def test_both_runners_copy_many_files_and_refuse_too_many_bytes(bwrap: str) -> None:
    many = {f"data/{n}.txt": str(n) for n in range(80)}
    program = "import os\nopen('metrics.json', 'w').write(str(len(os.listdir('data'))))\n"
    compiled = _run(bwrap, {"main.py": program, **many}, compiled=True)
    assert compiled.metrics == b"80"
    _same(compiled, _run(bwrap, {"main.py": program, **many}, compiled=False))
    # 2100 bytes, but a page of the 8 MiB tmpfs each: the copy inside fails.
    tiny = {f"data/{n}.txt": "x" for n in range(2100)}
    compiled = _run(bwrap, {"main.py": program, **tiny}, compiled=True)
    shell = _run(bwrap, {"main.py": program, **tiny}, compiled=False)
    for outcome in (compiled, shell):  # cp's complaints name whichever files did not fit
        assert outcome.exit_code == 125, outcome
        assert outcome.logs.endswith("yoyaku: the files do not fit in the sandbox\n")
    _same(dataclasses.replace(compiled, logs=""), dataclasses.replace(shell, logs=""))


def test_both_runners_hand_the_output_folder_back(bwrap: str) -> None:
    program = (
        "import os\nos.makedirs('/output/sub')\nopen('/output/sub/a.txt', 'w').write('A')\n"
        "open('/output/result.json', 'w').write('{\"score\": 5}')\n"
    )
    outcomes = []
    for compiled in (True, False):
        with tempfile.TemporaryDirectory() as collect:
            outcome = _run(
                bwrap,
                {"main.py": program},
                compiled=compiled,
                output="/output",
                result="/output/result.json",
                collect=Path(collect),
            )
            assert (Path(collect) / "sub" / "a.txt").read_text() == "A"
            outcomes.append(outcome)
    assert outcomes[0].metrics == b'{"score": 5}'
    _same(*outcomes)


TAMPER = """
import os
for name, mode in (("mem", "r+b"), ("fd/1", "wb")):
    try:
        open(f"/proc/{os.getppid()}/{name}", mode, buffering=0).close()
        print(name, "opened")
    except OSError as exc:
        print(name, "refused", exc.errno)
"""


def test_the_program_cannot_reach_the_compiled_runners_memory_or_channel(bwrap: str) -> None:
    compiled = _run(bwrap, {"main.py": TAMPER}, compiled=True)
    assert compiled.logs == "mem refused 13\nfd/1 refused 13\n"
    # The shell runner's memory is the program's to rewrite (same uid, dumpable).
    assert "mem opened" in _run(bwrap, {"main.py": TAMPER}, compiled=False).logs


def _status_of(argv: list[str]) -> dict[str, str]:
    out = subprocess.run(argv, capture_output=True, text=True, check=True, env={}).stdout
    return dict(line.split(":\t", 1) for line in out.splitlines() if ":\t" in line)


@pytest.mark.skipif(os.geteuid() != 0, reason="a root worker's uid switch")
def test_launch_leaves_no_uid_group_or_capability_of_root(bwrap: str) -> None:
    binary = runner_binary()
    assert binary is not None
    status = _status_of([binary, "launch", "61237", "--", "/bin/cat", "/proc/self/status"])
    assert status["Uid"].split() == ["61237"] * 4
    assert status["Gid"].split() == ["61237"] * 4
    assert status["Groups"].strip() == ""
    for name in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(status[name], 16) == 0, name
    refused = subprocess.run([binary, "launch", "0", "--", "/bin/true"], capture_output=True)
    assert refused.returncode == 126


@pytest.fixture
def temporary_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    runner_module.forget()
    yield tmp_path
    runner_module.forget()


@pytest.mark.parametrize("mode", [0o777, 0o775])
def test_a_cache_folder_others_can_write_is_not_used(temporary_root: Path, mode: int) -> None:
    folder = temporary_root / f"yoyaku-runner-{os.geteuid()}"
    folder.mkdir()
    folder.chmod(mode)
    assert runner_binary() is None
    assert list(folder.iterdir()) == []


def test_a_cache_folder_that_is_a_link_is_not_used(temporary_root: Path) -> None:
    (temporary_root / "elsewhere").mkdir(mode=0o755)
    (temporary_root / f"yoyaku-runner-{os.geteuid()}").symlink_to(temporary_root / "elsewhere")
    assert runner_binary() is None
    assert list((temporary_root / "elsewhere").iterdir()) == []


def test_the_time_zone_inside_is_the_hosts(bwrap: str) -> None:
    """/etc/localtime, a link into /usr on the host, is made again as a link inside."""
    program = (
        "import hashlib, os, time\n"
        "data = open('/etc/localtime', 'rb').read()\n"
        "print(os.path.realpath('/etc/localtime'), hashlib.sha256(data).hexdigest(), "
        "time.localtime(0).tm_gmtoff)\n"
    )
    host = Path("/etc/localtime")
    if not host.exists():
        pytest.skip("this host has no /etc/localtime")
    outcome = _run(bwrap, {"main.py": program}, compiled=True)
    expected = f"{os.path.realpath(host)} {hashlib.sha256(host.read_bytes()).hexdigest()}"
    assert outcome.logs == f"{expected} {time.localtime(0).tm_gmtoff}\n"


def test_a_binary_that_cannot_start_is_not_used(temporary_root: Path) -> None:
    """A temporary folder mounted `noexec` (here: a file that is not the runner) means the
    shell runner."""
    assert runner_binary() is not None
    built = next((temporary_root / f"yoyaku-runner-{os.geteuid()}").iterdir())
    built.write_bytes(b"#!/bin/false\n")
    runner_module.forget()
    assert runner_binary() is None


def test_a_binary_removed_since_is_built_again(temporary_root: Path) -> None:
    """A cleaner of the temporary folder may remove it while the worker runs."""
    binary = runner_binary()
    assert binary is not None
    Path(binary).unlink()
    assert runner_binary() == binary
    assert Path(binary).is_file()
