"""A hostile program against the grading sandbox: every attack of the isolation issue, run for
real, through the real worker path (`grade_job` in this process, a root worker) and through
the isolation package run by an unprivileged worker uid. Each program reports what it managed
to do on a `REPORT` line of its logs; the tests assert that list is empty and check from the
host what a report cannot show (uids, survivors, the database, other gradings' results)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection

from apps.grading.isolation.runner import runner_binary
from apps.grading.tasks import grade_job
from apps.jobs.models import Job
from apps.submissions.models import Submission, SubmissionStatus
from tests.concurrency import run_concurrently
from tests.factories.jobs import make_job
from tests.factories.submissions import make_stored_submission
from tests.grading.sandboxes import (
    pid_namespace,
    processes_with_argument,
    real_effective_saved_uids,
    sandbox_processes,
    sleep_argument,
)
from tests.grading.workers import GOOD, REPORT, Grade, grade_as_root_worker, read_report

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(settings.BASE_DIR)


@pytest.fixture(autouse=True)
def _sandbox(sandbox_settings: Any) -> None:
    """bubblewrap with small limits (tests/review/conftest.py)."""


def _assert_nothing(grade: Grade, program: str, config: dict[str, Any] | None = None) -> None:
    _, logs = grade(program, config)
    report = read_report(logs)
    assert report["found"] == [], report


# --- Secrets, files, code and network --------------------------------------------------------


def test_no_secret_in_any_process_environment_or_command_line(grade: Grade, canary: str) -> None:
    program = """
    import os
    found, pids = [], []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            pids.append(int(pid))
            for name in ("environ", "cmdline"):
                try:
                    data = open(f"/proc/{pid}/{name}", "rb").read()
                except OSError:
                    continue
                if b"canary-" in data or b"SECRET_KEY" in data or b"DATABASE_URL" in data:
                    found.append(f"{pid}/{name}")
    found += [name for name in os.environ if "SECRET" in name or "DATABASE" in name]
    try:
        environ1 = open("/proc/1/environ", "rb").read().decode()
    except PermissionError:
        environ1 = "refused"
    report(found, pids=sorted(pids), environ1=environ1)
    """
    _, logs = grade(program)
    report = read_report(logs)

    assert report["found"] == []
    assert canary not in logs
    # PID 1 is the compiled runner, not dumpable: its environment cannot be read (with the
    # shell runner, bubblewrap's reaper, which starts with an empty one).
    assert report["environ1"] == ("refused" if runner_binary() is not None else "")
    assert max(report["pids"]) < 10  # its own PID namespace: the runner, the program, PID 1


def test_platform_files_are_invisible(grade: Grade, tmp_path: Path) -> None:
    database = settings.DATABASES["default"]["NAME"]
    paths = [
        str(ROOT),
        str(ROOT / "manage.py"),
        str(ROOT / "config" / "settings" / "base.py"),
        str(database),
        str(settings.MEDIA_ROOT),
        str(Path(sys.prefix) / "bin" / "python"),
        "/etc/shadow",
        "/etc/passwd",
        "/root",
        "/home",
        "/var",
        "/work",
        str(tmp_path),
        tempfile.gettempdir() + "/yoyaku-grade-",
    ]
    program = """
    import glob, os, sys
    found = []
    for path in json.load(open(sys.argv[1]))["paths"]:
        try:
            if os.path.isdir(path):
                os.listdir(path)
            else:
                open(path, "rb").read(1)
            found.append(path)
        except OSError:
            pass
    for pattern in ("/tmp/yoyaku-grade-*", "/*/*.sqlite3", "/*/*/*.sqlite3"):
        found += glob.glob(pattern)
    report(found)
    """
    _assert_nothing(grade, program, {"paths": paths})


def test_platform_code_is_not_importable(grade: Grade) -> None:
    program = """
    import importlib
    found = []
    for name in ("django", "psycopg", "rest_framework", "django_q", "redis", "apps", "config"):
        try:
            importlib.import_module(name)
            found.append(name)
        except ImportError:
            pass
    report(found)
    """
    _assert_nothing(grade, program)


@pytest.fixture
def listening_port() -> Iterator[int]:
    """A real server socket on loopback, standing for the web port."""
    server = socket.create_server(("127.0.0.1", 0))
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def test_no_network_at_all(grade: Grade, listening_port: int) -> None:
    program = """
    import socket, sys
    found = []
    for port in json.load(open(sys.argv[1]))["ports"]:
        for host in ("127.0.0.1", "::1", "localhost"):
            try:
                socket.create_connection((host, port), timeout=1).close()
                found.append(f"{host}:{port}")
            except OSError:
                pass
    interfaces = [name for _, name in socket.if_nameindex()]
    found += [name for name in interfaces if name != "lo"]
    report(found, interfaces=interfaces)
    """
    _assert_nothing(grade, program, {"ports": [5432, 6379, 8000, listening_port]})


# --- Privileges ------------------------------------------------------------------------------


def test_no_privilege_inside_and_no_root_process_on_the_host(grade: Grade) -> None:
    program = """
    import ctypes, os, time
    found = []
    for attempt in (lambda: os.setuid(0), lambda: os.setgid(0), lambda: os.setgroups([0]),
                    lambda: os.chroot("/")):
        try:
            attempt()
            found.append("privileged call succeeded")
        except OSError:
            pass
    libc = ctypes.CDLL(None, use_errno=True)
    for name, flag in (("user", 0x10000000), ("net", 0x40000000), ("mount", 0x00020000)):
        if libc.unshare(flag) == 0:  # Python 3.11 has no os.unshare: the syscall itself
            found.append(f"unshare({name}) succeeded")
    if libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) == 0:
        found.append("mount succeeded")
    status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines())
    caps = {k: status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
    found += [k for k, v in caps.items() if int(v, 16) != 0]
    if status["NoNewPrivs"].strip() != "1":
        found.append("no_new_privs is off")
    print("sleeping", flush=True)
    time.sleep(1.5)
    report(found, resuid=list(os.getresuid()), resgid=list(os.getresgid()))
    """
    seen: list[tuple[int, tuple[int, int, int] | None]] = []
    stop = threading.Event()

    def sample() -> None:
        # While the program sleeps: every host process of the sandbox, bubblewrap included.
        while not stop.wait(0.1):
            seen.extend(
                (pid, real_effective_saved_uids(pid)) for pid in sandbox_processes(os.getpid())
            )

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        _, logs = grade(program)
    finally:
        stop.set()
        sampler.join()
    report = read_report(logs)

    assert report["found"] == []
    assert report["resuid"] == [1000, 1000, 1000]
    assert report["resgid"] == [1000, 1000, 1000]
    sandboxed = [uids for pid, uids in seen if uids is not None]
    assert sandboxed, "no sandbox process was seen from the host"
    assert all(0 not in uids for uids in sandboxed), seen


def test_setsid_double_fork_leaves_no_survivor(grade: Grade) -> None:
    marker = sleep_argument(731)
    program = f"""
    import os, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv("/bin/sleep", ["sleep", "{marker}"])
        os._exit(0)
    time.sleep(0.3)
    open("metrics.json", "w").write('{{"score": 1}}')
    report([])
    """
    status, logs = grade(program)

    assert status == SubmissionStatus.COMPLETED, logs
    assert processes_with_argument(marker) == []


def test_the_worker_cannot_be_signalled_or_traced(grade: Grade) -> None:
    program = """
    import ctypes, os, signal, sys
    worker = json.load(open(sys.argv[1]))["worker"]
    found = []
    try:
        os.kill(worker, 0)
        found.append("the worker's pid is visible")
    except ProcessLookupError:
        pass
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, worker, 0, 0) == 0:  # PTRACE_ATTACH
        found.append("ptrace attached")
    report(found)
    os.kill(-1, signal.SIGKILL)  # every process it can reach
    """
    status, logs = grade(program, {"worker": os.getpid()})

    assert read_report(logs)["found"] == []
    assert status == SubmissionStatus.FAILED  # it killed its own runner, nothing else
    assert grade(GOOD)[0] == "completed"


# --- Resources -------------------------------------------------------------------------------


def test_fork_bomb_stops_at_the_task_limit(grade: Grade, settings: Any) -> None:
    settings.GRADING_TIMEOUT = 2
    program = """
    import os
    while True:
        try:
            os.fork()
        except OSError:
            pass
    """
    status, logs = grade(program)

    assert status == "failed", logs
    assert sandbox_processes(os.getpid()) == []
    assert grade(GOOD)[0] == "completed"


def test_four_gib_allocation_fails_inside(grade: Grade) -> None:
    program = """
    found = []
    try:
        block = bytearray(4 * 1024**3)
        found.append(f"allocated {len(block)} bytes")
    except MemoryError:
        pass
    report(found)
    """
    _assert_nothing(grade, program)


def test_writing_ten_gib_stops_at_the_scratch_limit(grade: Grade) -> None:
    program = """
    written = 0
    chunk = b"x" * (1024 * 1024)
    try:
        with open("big.bin", "wb") as out:
            while written < 10 * 1024**3:
                out.write(chunk)
                written += len(chunk)
    except OSError as exc:
        error = str(exc)
    report([] if written < 10 * 1024**3 else ["wrote 10 GiB"], written=written, error=error)
    """
    _, logs = grade(program)
    report = read_report(logs)

    assert report["found"] == []
    assert report["written"] <= settings.GRADING_SCRATCH_SIZE
    assert "No space left" in report["error"] or "File too large" in report["error"]


def test_printing_100_mb_is_cut_and_stopped(grade: Grade) -> None:
    program = """
    import sys
    for _ in range(100):
        sys.stdout.write("p" * (1024 * 1024))
    report(["printed 100 MB"])
    """
    status, logs = grade(program)

    assert status == "failed"
    assert "REPORT" not in logs
    assert len(logs) <= settings.GRADING_MAX_OUTPUT + 200


def test_read_only_everywhere_but_the_scratch(grade: Grade) -> None:
    program = """
    import os, sys
    found = []
    folder = os.path.dirname(os.__file__)
    for path in (folder + "/evil.py", "/usr/bin/evil", "/evil", "/input/evil", "/dev/evil",
                 "/etc/evil", sys.executable):
        try:
            open(path, "ab").close()
            found.append(path)
        except OSError:
            pass
    open("own.txt", "w").write("mine")
    open("/tmp/own.txt", "w").write("mine")
    report(found)
    """
    _assert_nothing(grade, program)


# --- Results ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_metrics_that_is_not_a_regular_file_fails_fast(grade: Grade, kind: str) -> None:
    program = f"""
    import os
    if {kind!r} == "fifo":
        os.mkfifo("metrics.json")
    else:
        os.symlink("/etc/passwd", "metrics.json")
    report([])
    """
    started = time.monotonic()
    status, logs = grade(program)

    assert status in ("failed", SubmissionStatus.FAILED)
    assert time.monotonic() - started < float(settings.GRADING_TIMEOUT)
    assert "root:" not in logs


def test_out_of_range_and_infinite_scores_go_to_review(user: User, settings: Any) -> None:
    settings.GRADING_SCORE_MAX = 100
    for score in ("1e308", "Infinity", "1" + "0" * 400, "NaN"):
        status, _ = grade_as_root_worker(
            user, f"open('metrics.json', 'w').write('{{\"score\": {score}}}')\nreport([])", {}
        )
        assert status == SubmissionStatus.REVIEW_PENDING, score
    settings.GRADING_SCORE_MIN = 0
    status, _ = grade_as_root_worker(
        user, "open('metrics.json', 'w').write('{\"score\": -3}')\nreport([])", {}
    )
    assert status == SubmissionStatus.REVIEW_PENDING


@pytest.mark.slow
def test_concurrent_gradings_cannot_see_or_forge_each_other(user: User) -> None:
    victim_program = """
    import time
    time.sleep(1.5)
    open("metrics.json", "w").write('{"score": 0.25}')
    report([])
    """
    attacker_program = """
    import glob, os, time
    time.sleep(0.3)
    found = []
    for pattern in ("/tmp/yoyaku-grade-*", "/tmp/*/metrics.json", "/sandbox/*/*/metrics.json",
                    "/input/../*/metrics.json", "/*/yoyaku-grade-*/metrics.json"):
        for path in glob.glob(pattern):
            try:
                open(path, "w").write('{"score": 1e9}')
                found.append(path)
            except OSError:
                pass
    open("metrics.json", "w").write('{"score": 0.5}')
    report(found)
    """
    submissions = [
        make_stored_submission(user, program=REPORT + textwrap.dedent(p))
        for p in (victim_program, attacker_program)
    ]
    jobs = [make_job(s) for s in submissions]

    run_concurrently(lambda i: grade_job(jobs[i].pk), 2)

    victim, attacker = (Submission.objects.get(pk=s.pk) for s in submissions)
    assert (victim.status, victim.score) == (SubmissionStatus.COMPLETED, 0.25)
    assert (attacker.status, attacker.score) == (SubmissionStatus.COMPLETED, 0.5)
    report = read_report(Job.objects.get(pk=jobs[1].pk).logs)
    assert report["found"] == []


def test_the_database_and_other_submissions_are_untouched(user: User, other_user: User) -> None:
    bystander = make_stored_submission(other_user, program="x = 1\n")
    program = """
    import os, sqlite3, sys
    found = []
    try:
        db = sqlite3.connect(json.load(open(sys.argv[1]))["database"], timeout=1)
        db.execute("UPDATE auth_user SET is_superuser = 1, is_staff = 1")
        db.commit()
        found.append("wrote the database")
    except sqlite3.Error:
        pass
    report(found)
    """
    database = str(settings.DATABASES["default"]["NAME"])
    _, logs = grade_as_root_worker(user, program, {"database": database})

    assert read_report(logs)["found"] == []
    user.refresh_from_db()
    assert not user.is_staff
    assert not user.is_superuser
    assert Submission.objects.get(pk=bystander.pk).status == bystander.status
    assert not User.objects.filter(is_superuser=True).exists()
    connection.close()


def test_sandbox_pid_namespace_is_not_the_workers(user: User) -> None:
    """Seen from the host while it runs, the program lives in a PID namespace of its own."""
    seen: set[str | None] = set()
    stop = threading.Event()
    marker = sleep_argument(4)

    def sample() -> None:
        while not stop.wait(0.05):
            for pid in processes_with_argument(marker):
                seen.add(pid_namespace(pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        grade_as_root_worker(
            user, f"import subprocess\nsubprocess.run(['/bin/sleep', '{marker}'])\nreport([])", {}
        )
    finally:
        stop.set()
        sampler.join()
    assert seen
    assert pid_namespace(os.getpid()) not in seen


def test_the_isolation_package_imports_no_django() -> None:
    """It takes paths, limits and argv: testable and usable without the platform."""
    code = (
        "import sys, apps.grading.isolation, apps.grading.isolation.__main__; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'config')))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert run.stdout.strip() == "[]"
