"""The grader's zygote launcher with real processes: reuse, isolation between gradings,
timeouts, a launcher that dies, and a worker that dies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.db import connections

from apps.jobs.models import Job
from apps.review import sandbox_zygote
from apps.review.sandbox_zygote import LAUNCHER_DIED, zygote_stop
from apps.review.tasks import grade_job
from apps.submissions.models import Submission, SubmissionStatus
from tests.review.factories import make_job, make_submission

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _zygote(settings: Any) -> Iterator[None]:
    settings.GRADER = "apps.review.grader.SubprocessGrader"
    settings.GRADING_ZYGOTE = True
    settings.GRADING_TIMEOUT = 3
    settings.GRADING_MEMORY_LIMIT = 512 * 1024 * 1024
    settings.GRADING_MAX_OUTPUT = 64 * 1024
    zygote_stop()
    yield
    zygote_stop()


def _grade(user: User, program: str) -> tuple[Submission, Job]:
    submission = make_submission(user, program=program)
    job = make_job(submission)
    grade_job(job.pk)
    submission.refresh_from_db()
    job.refresh_from_db()
    return submission, job


def _zygote_pid() -> int | None:
    zygote = sandbox_zygote._zygote
    return None if zygote is None else zygote.process.pid


def _alive(pid: int) -> bool:
    """Running, i.e. neither gone nor a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait_dead(pids: list[int], seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while (alive := [pid for pid in pids if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


REPORT = """
import json, os, sys
print(json.dumps({"pid": os.getpid(), "ppid": os.getppid()}))
json.dump({"score": 1}, open("metrics.json", "w"))
"""


def _report(job: Job) -> dict[str, Any]:
    line = [x for x in job.logs.splitlines() if x.startswith("{")][-1]
    report: dict[str, Any] = json.loads(line)
    return report


def test_programs_are_forked_by_one_long_lived_zygote(user: User) -> None:
    first, first_job = _grade(user, REPORT)
    second, second_job = _grade(user, REPORT)

    assert first.status == second.status == SubmissionStatus.COMPLETED
    zygote = _zygote_pid()
    assert zygote is not None
    one, two = _report(first_job), _report(second_job)
    assert one["ppid"] == two["ppid"] == zygote
    assert one["pid"] != two["pid"]
    assert not _alive(one["pid"])


def test_program_runs_like_python_entrypoint_config(user: User) -> None:
    program = """
import json, os, sys
import __main__
print(json.dumps({
    "argv": sys.argv, "file": __file__, "name": __name__, "main": __main__.__file__,
    "path0": sys.path[0], "cwd": os.getcwd(), "executable": sys.executable,
    "flags": [sys.flags.isolated, sys.flags.no_site, sys.flags.safe_path],
}))
json.dump({"score": 1}, open("metrics.json", "w"))
"""
    submission, job = _grade(user, program)

    assert submission.status == SubmissionStatus.COMPLETED, job.logs
    seen = json.loads(job.logs.strip().splitlines()[-1])
    assert seen["argv"] == ["main.py", "config.yaml"]
    assert seen["name"] == "__main__"
    assert seen["file"] == seen["main"] == os.path.join(seen["cwd"], "main.py")
    assert seen["path0"] == seen["cwd"]
    assert "yoyaku-grade-" in seen["cwd"]
    assert seen["executable"] == sys.executable
    assert seen["flags"] == [0, 0, False]
    assert str(django_settings.BASE_DIR) + "/apps" not in job.logs


def test_exit_codes_tracebacks_and_sys_exit_match_the_interpreter(user: User) -> None:
    failing, failing_job = _grade(user, "def boom():\n    raise ValueError('no')\nboom()\n")
    exiting, exiting_job = _grade(user, "import sys\nsys.exit('goodbye')\n")
    coded, _ = _grade(user, "import sys\nsys.exit(7)\n")

    assert failing.status == SubmissionStatus.FAILED
    assert "exit code 1" in failing.status_reason
    assert failing_job.logs.startswith("Traceback (most recent call last):\n  File ")
    assert 'main.py", line 3, in <module>' in failing_job.logs
    assert "ValueError: no" in failing_job.logs
    assert "sandbox_supervisor" not in failing_job.logs
    assert "exit code 1" in exiting.status_reason
    assert exiting_job.logs.strip() == "goodbye"
    assert "exit code 7" in coded.status_reason


def test_state_a_program_changes_does_not_reach_the_next_grading(user: User) -> None:
    polluter = """
import json, os, signal, sys, resource, builtins, json as j
os.environ["LEAKED"] = "yes"
os.putenv("LEAKED_C", "yes")
os.umask(0o000)
sys.path.append("/leaked")
sys.modules["leaked_module"] = object()
builtins.leaked = True
j.leaked = True
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))
os.chdir("/")
json.dump({"score": 1}, open(os.environ["HOME"] + "/metrics.json", "w"))
"""
    probe = """
import json, os, signal, sys, resource, builtins
old = os.umask(0o022)
print(json.dumps({
    "env": sorted(k for k in os.environ if k.startswith("LEAK")),
    "umask": old,
    "path": "/leaked" in sys.path,
    "module": "leaked_module" in sys.modules,
    "builtin": hasattr(builtins, "leaked"),
    "json": hasattr(json, "leaked"),
    "sigusr1": signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN,
    "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
}))
json.dump({"score": 1}, open("metrics.json", "w"))
"""
    polluted, _ = _grade(user, polluter)
    probed, job = _grade(user, probe)

    assert polluted.status == probed.status == SubmissionStatus.COMPLETED, job.logs
    seen = json.loads(job.logs.strip().splitlines()[-1])
    assert seen == {
        "env": [],
        "umask": seen["umask"],
        "path": False,
        "module": False,
        "builtin": False,
        "json": False,
        "sigusr1": False,
        "nofile": 256,
    }
    assert seen["umask"] != 0


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid and capabilities need a root worker")
def test_forked_program_has_the_sandbox_uid_and_no_resource_capabilities(user: User) -> None:
    program = """
import json
lines = open("/proc/self/status").read().splitlines()
status = dict(line.split(":\\t", 1) for line in lines if ":\\t" in line)
print(json.dumps({"uid": status["Uid"].split(), "capeff": status["CapEff"].strip()}))
json.dump({"score": 1}, open("metrics.json", "w"))
"""
    submission, job = _grade(user, program)

    assert submission.status == SubmissionStatus.COMPLETED, job.logs
    assert _report_line(job)["uid"][0] != "0"
    capeff = int(_report_line(job)["capeff"], 16)
    assert not capeff & (1 << 21)  # CAP_SYS_ADMIN
    assert not capeff & (1 << 24)  # CAP_SYS_RESOURCE


def _report_line(job: Job) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(job.logs.strip().splitlines()[-1])
    return result


def test_timeout_kills_the_forked_program_and_its_children(user: User, settings: Any) -> None:
    settings.GRADING_TIMEOUT = 1
    program = """
import os, time
child = os.fork()
if child == 0:
    time.sleep(60)
    os._exit(0)
print("pids", os.getpid(), child, flush=True)
while True:
    time.sleep(0.01)
"""
    submission, job = _grade(user, program)

    assert submission.status == SubmissionStatus.FAILED
    assert "Timed out after GRADING_TIMEOUT (1 s)" in submission.status_reason
    pids = [int(x) for x in job.logs.split("pids", 1)[1].split()[:2]]
    assert _wait_dead(pids, 0.5) == []
    zygote = _zygote_pid()
    assert zygote is not None
    assert _alive(zygote)
    after, _ = _grade(user, REPORT)
    assert after.status == SubmissionStatus.COMPLETED


def test_a_program_that_kills_the_zygote_fails_and_the_next_grading_works(user: User) -> None:
    program = """
import os, signal, time
child = os.fork()
if child == 0:
    time.sleep(60)
    os._exit(0)
print("pids", os.getpid(), child, os.getppid(), flush=True)
os.kill(os.getppid(), signal.SIGKILL)
time.sleep(60)
"""
    submission, job = _grade(user, program)

    assert submission.status == SubmissionStatus.FAILED
    assert submission.status_reason == LAUNCHER_DIED
    pids = [int(x) for x in job.logs.split("pids", 1)[1].split()[:3]]
    assert _wait_dead(pids) == []
    after, after_job = _grade(user, REPORT)
    assert after.status == SubmissionStatus.COMPLETED, after_job.logs


def test_a_zygote_killed_between_gradings_is_replaced(user: User) -> None:
    _grade(user, REPORT)
    first = _zygote_pid()
    assert first is not None
    os.kill(first, signal.SIGKILL)
    assert _wait_dead([first]) == []

    submission, job = _grade(user, REPORT)

    assert submission.status == SubmissionStatus.COMPLETED, job.logs
    assert _zygote_pid() not in (None, first)


@pytest.mark.django_db(transaction=True)
def test_other_threads_spawn_their_programs(user: User) -> None:
    submission = make_submission(user, program=REPORT)
    job = make_job(submission)

    def grade_in_a_thread() -> None:
        try:
            grade_job(job.pk)
        finally:
            connections.close_all()

    thread = threading.Thread(target=grade_in_a_thread)
    thread.start()
    thread.join()

    submission.refresh_from_db()
    job.refresh_from_db()
    assert submission.status == SubmissionStatus.COMPLETED, job.logs
    zygote = _zygote_pid()
    assert zygote is None or _report(job)["ppid"] != zygote


WORKER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from apps.review.sandbox import Limits
from apps.review.sandbox_zygote import run_in_zygote
folder = Path({folder!r})
limits = Limits(cpu_seconds=60, memory_bytes=1 << 30, file_bytes=1 << 24, processes=4096,
                drop_to_uid=None)
run_in_zygote(["main.py"], cwd=folder, limits=limits, timeout=60, max_output=1 << 16)
"""

SLEEPER = """
import os, time
child = os.fork()
if child == 0:
    time.sleep(60)
    os._exit(0)
with open("pids.txt", "w") as out:
    out.write(f"{os.getpid()} {child} {os.getppid()}")
time.sleep(60)
"""


def test_a_killed_worker_takes_its_zygote_and_the_running_program_with_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "main.py").write_text(textwrap.dedent(SLEEPER))
    script = WORKER.format(root=str(django_settings.BASE_DIR), folder=str(tmp_path))
    worker = subprocess.Popen([sys.executable, "-c", script])
    try:
        pids_file = tmp_path / "pids.txt"
        deadline = time.monotonic() + 30
        while not pids_file.exists() or len(pids_file.read_text().split()) < 3:
            assert time.monotonic() < deadline, "the program did not start"
            assert worker.poll() is None
            time.sleep(0.05)
        pids = [int(x) for x in pids_file.read_text().split()]
        assert all(_alive(pid) for pid in pids)
    finally:
        worker.kill()
        worker.wait()

    assert _wait_dead(pids) == []


EXIT_CASES = {
    "unclosed file in __main__": (
        "out = open('metrics.json', 'w')\nout.write('{\"score\": 0.5}')\n",
        {},
        0.5,
    ),
    "unclosed file in an imported module": (
        "import helper\nhelper.out.write('{\"score\": 0.25}')\n",
        {"helper.py": b"out = open('metrics.json', 'w')\n"},
        0.25,
    ),
    "atexit handler": (
        "import atexit, json\n"
        "atexit.register(lambda: json.dump({'score': 0.75}, open('metrics.json', 'w')))\n",
        {},
        0.75,
    ),
    "non-daemon thread": (
        "import json, threading, time\n"
        "def late():\n"
        "    time.sleep(0.2)\n"
        "    json.dump({'score': 0.125}, open('metrics.json', 'w'))\n"
        "threading.Thread(target=late).start()\n",
        {},
        0.125,
    ),
    "finalizer": (
        "import json\n"
        "class Writer:\n"
        "    def __del__(self, dump=json.dump, open=open, print=print):\n"
        "        dump({'score': 0.375}, open('metrics.json', 'w'))\n"
        "        print('finalized')\n"
        "w = Writer()\n",
        {},
        0.375,
    ),
}


@pytest.mark.parametrize("zygote", [True, False], ids=["zygote", "spawn"])
@pytest.mark.parametrize("case", list(EXIT_CASES))
def test_what_happens_at_exit_is_what_the_interpreter_does(
    user: User, settings: Any, zygote: bool, case: str
) -> None:
    settings.GRADING_ZYGOTE = zygote
    program, extra_files, score = EXIT_CASES[case]
    submission = make_submission(user, program=program, extra_files=extra_files)
    job = make_job(submission)
    grade_job(job.pk)
    submission.refresh_from_db()
    job.refresh_from_db()

    assert submission.status == SubmissionStatus.COMPLETED, (submission.status_reason, job.logs)
    assert submission.score == score
    if case == "finalizer":
        assert "finalized" in job.logs


@pytest.mark.parametrize("zygote", [True, False], ids=["zygote", "spawn"])
def test_exit_statuses_are_the_interpreters(user: User, settings: Any, zygote: bool) -> None:
    settings.GRADING_ZYGOTE = zygote
    cases = {
        "import sys\nsys.exit(3)\n": "exit code 3",
        "import sys\nsys.exit(True)\n": "exit code 1",
        "import sys\nsys.exit(256 + 5)\n": "exit code 5",
        "import os\nos._exit(9)\n": "exit code 9",
        "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n": "killed by SIGTERM",
        "import atexit, sys\natexit.register(print, 'bye')\nsys.exit('no')\n": "exit code 1",
    }
    for program, reason in cases.items():
        submission, job = _grade(user, program)
        assert submission.status == SubmissionStatus.FAILED
        assert reason in submission.status_reason, (program, submission.status_reason)
    assert job.logs == "no\nbye\n"
