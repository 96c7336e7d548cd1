"""The kernel surface a graded program can reach: every system call the seccomp filter refuses
is called for real from inside the sandbox (EPERM, `clone3` ENOSYS, other conventions killed),
host-wide `/proc` figures are read and found fixed or empty, ordinary programs still run, and a
host that cannot build the filter grades nothing. Each runs through both workers (root through
`grade_job`, an unprivileged uid through the isolation package)."""

from __future__ import annotations

import errno
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from apps.grading.isolation import Limits, isolation_probe
from apps.grading.isolation.procmask import EMPTY_FILES, EMPTY_FOLDERS, fixed_contents
from apps.grading.isolation.seccomp import (
    CLONE_NAMESPACE_FLAGS,
    REFUSED_SYSCALLS,
    seccomp_program,
    syscall_number,
)
from apps.grading.tasks import grade_job
from apps.submissions.models import SubmissionStatus
from tests.factories.jobs import make_job
from tests.factories.submissions import make_stored_submission
from tests.grading.workers import (
    GOOD,
    REPORT,
    ROOT,
    UNPRIVILEGED_UID,
    Grade,
    read_report,
)

pytestmark = pytest.mark.django_db(transaction=True)

# SPEC §11.8: the filter refuses at least these.
SPEC_REFUSED = (
    "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key",
    "request_key", "bpf", "userfaultfd", "perf_event_open", "ptrace", "mount", "umount2",
    "unshare", "setns", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "pivot_root", "open_by_handle_at", "swapon", "swapoff", "reboot",
)  # fmt: skip
# SPEC §11.8: host-wide figures not readable inside.
SPEC_MASKED = ("loadavg", "stat", "meminfo", "diskstats", "interrupts")


@pytest.fixture(autouse=True)
def _sandbox(sandbox_settings: Any) -> None:
    """bubblewrap with small limits (tests/grading/conftest.py)."""


# Calls each system call by number through libc and reports its errno (0: it worked). The
# arguments are those with which the call succeeds, or fails for a reason other than
# permission, when no filter stands in the way (see the control test below).
SYSCALLS = """
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
config = json.load(open(sys.argv[1]))
numbers = config["numbers"]
io_uring_params = ctypes.create_string_buffer(120)
handle = ctypes.create_string_buffer(128)
ctypes.memmove(handle, (128 - 8).to_bytes(4, "little"), 4)
mount_id = ctypes.c_int()
args = {
    "io_uring_setup": (1, io_uring_params),
    "add_key": (b"user", b"yoyaku", b"payload", 7, -2),
    "keyctl": (0, -2, 0),
    "request_key": (b"user", b"yoyaku", None, 0),
    "setns": (-1, 0),
    "open_tree": (-100, b"/", 0),
    "name_to_handle_at": (-100, b".", handle, ctypes.byref(mount_id), 0),
    "clone3": (None, 0),
    "ptrace": (2, 1, 0, 0),  # PTRACE_PEEKDATA of a process not traced: ESRCH
}
def call(number, *arguments):
    ctypes.set_errno(0)
    result = libc.syscall(number, *arguments)
    return ctypes.get_errno() if result == -1 else 0
errnos = {}
for name in [*config["refused"], "clone3"]:
    errnos[name] = call(numbers[name], *args.get(name, (0, 0, 0, 0, 0, 0)))
for name, flag in config["clone_flags"].items():
    # CLONE_SIGHAND without CLONE_VM: EINVAL, where nothing refuses the flag first (no fork).
    errnos["clone " + name] = call(numbers["clone"], flag | 0x800 | 17, 0, 0, 0, 0)
ctypes.set_errno(0)
persona = libc.personality(ctypes.c_ulong(0xFFFFFFFF))
errnos["personality query"] = 0 if persona != -1 else ctypes.get_errno()
ctypes.set_errno(0)
changed = libc.personality(ctypes.c_ulong(persona | 0x0040000))
errnos["personality ADDR_NO_RANDOMIZE"] = 0 if changed != -1 else ctypes.get_errno()
for name in ("getpid", "uname", "sched_yield", "getrandom"):
    buffer = ctypes.create_string_buffer(512)
    errnos[name] = call(numbers[name], buffer, 16, 0)
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
report([], errnos=errnos, seccomp=status.get("Seccomp", "").strip())
"""
ORDINARY = ("getpid", "uname", "sched_yield", "getrandom")


def _syscall_config() -> dict[str, Any]:
    names = [*REFUSED_SYSCALLS, "clone", "clone3", *ORDINARY]
    numbers = {name: syscall_number(name) for name in names}
    return {
        "numbers": {name: number for name, number in numbers.items() if number is not None},
        "refused": [name for name in REFUSED_SYSCALLS if numbers[name] is not None],
        "clone_flags": CLONE_NAMESPACE_FLAGS,
    }


def test_the_filter_refuses_everything_the_spec_names() -> None:
    assert set(SPEC_REFUSED) <= set(REFUSED_SYSCALLS)
    assert set(CLONE_NAMESPACE_FLAGS) >= {"CLONE_NEWUSER", "CLONE_NEWNS", "CLONE_NEWNET"}
    assert all(syscall_number(name) is not None for name in SPEC_REFUSED)
    assert len(seccomp_program()) % 8 == 0  # whole BPF instructions


def test_every_refused_syscall_answers_eperm_inside(grade: Grade) -> None:
    config = _syscall_config()
    _, logs = grade(SYSCALLS, config)
    report = read_report(logs)
    errnos: dict[str, int] = report["errnos"]

    assert logs.count("REPORT") == 1  # nothing forked
    assert report["seccomp"] == "2"  # a filter is loaded, in the program itself
    refused = [*config["refused"], *(f"clone {flag}" for flag in CLONE_NAMESPACE_FLAGS)]
    refused.append("personality ADDR_NO_RANDOMIZE")
    assert {name: errnos[name] for name in refused} == dict.fromkeys(refused, errno.EPERM)
    # clone3's flags cannot be read by a filter: ENOSYS, so libc falls back to clone.
    assert errnos["clone3"] == errno.ENOSYS
    # What programs need still works.
    assert {name: errnos[name] for name in (*ORDINARY, "personality query")} == dict.fromkeys(
        (*ORDINARY, "personality query"), 0
    )


@pytest.fixture
def public_folder() -> Iterator[Path]:
    """A folder another uid can enter (pytest's own temporary folders are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="yoyaku-test-surface-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_without_the_filter_the_same_calls_get_through(public_folder: Path) -> None:
    """The control: the same program on the host (no sandbox, an unprivileged uid) is not
    refused, so the EPERMs inside come from the filter and the probe's arguments are live."""
    if os.geteuid() != 0:
        pytest.skip("switching to another uid needs root")
    (public_folder / "main.py").write_text(REPORT + textwrap.dedent(SYSCALLS))
    (public_folder / "config.json").write_text(json.dumps(_syscall_config()))
    run = subprocess.run(
        ["/usr/bin/python3", "-I", "main.py", "config.json"],
        cwd=public_folder,
        user=UNPRIVILEGED_UID,
        group=UNPRIVILEGED_UID,
        extra_groups=[],
        env={},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert run.stdout.count("REPORT") == 1  # nothing forked
    errnos = read_report(run.stdout)["errnos"]
    live = ["io_uring_setup", "add_key", "keyctl", "ptrace", "unshare", "setns", "open_tree"]
    live += ["clone3", *(f"clone {flag}" for flag in CLONE_NAMESPACE_FLAGS)]
    assert {name: errnos[name] for name in live if errnos[name] == errno.EPERM} == {}
    assert errnos["personality ADDR_NO_RANDOMIZE"] == 0


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86 conventions")
def test_other_syscall_conventions_kill_the_process(grade: Grade) -> None:
    """A 32-bit `int 0x80` call and an x32 call would bypass rules written for x86_64: the
    process that makes one is killed (SIGSYS) before the kernel runs it."""
    program = """
    import ctypes, mmap, os
    libc = ctypes.CDLL(None, use_errno=True)
    def in_child(attempt):
        pid = os.fork()
        if pid == 0:
            attempt()
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        return os.WTERMSIG(status) if os.WIFSIGNALED(status) else -os.WEXITSTATUS(status)
    def int80_getpid():
        page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(b"\\xb8\\x14\\x00\\x00\\x00\\xcd\\x80\\xc3")  # mov eax, 20; int 0x80; ret
        address = ctypes.addressof(ctypes.c_char.from_buffer(page))
        function = ctypes.CFUNCTYPE(ctypes.c_int)(address)
        print("int 0x80 getpid returned", function(), flush=True)
    def x32_getpid():
        print("x32 getpid returned", libc.syscall(0x40000000 | 39), flush=True)
    report([], int80=in_child(int80_getpid), x32=in_child(x32_getpid))
    """
    _, logs = grade(program)
    report = read_report(logs)

    assert (report["int80"], report["x32"]) == (signal.SIGSYS, signal.SIGSYS)
    assert "returned" not in logs


PROC = """
import os, sys, json
names = json.load(open(sys.argv[1]))
def read(name):
    try:
        return open("/proc/" + name).read()
    except OSError as error:
        return f"refused: {error.errno}"
first = {name: read(name) for name in names["files"]}
sum(i * i for i in range(3_000_000))  # busy for a while: nothing measured may change
second = {name: read(name) for name in names["files"]}
folders = {name: sorted(os.listdir("/proc/" + name)) for name in names["folders"]}
writes = []
for name in names["files"]:
    try:
        open("/proc/" + name, "w").write("0")
        writes.append(name)
    except OSError:
        pass
report(writes, first=first, second=second, folders=folders)
"""


def test_host_wide_proc_figures_are_fixed_or_empty_inside(grade: Grade, settings: Any) -> None:
    limits = Limits(
        wall_seconds=1,
        cpu_seconds=1,
        memory_bytes=int(settings.GRADING_MEMORY_LIMIT),
        file_bytes=0,
        scratch_bytes=0,
        processes=1,
    )
    fixed = fixed_contents(limits, cpus=len(os.sched_getaffinity(0)))
    files = [name for name in (*fixed, *EMPTY_FILES) if os.path.exists(f"/proc/{name}")]
    folders = [name for name in EMPTY_FOLDERS if os.path.exists(f"/proc/{name}")]
    assert set(SPEC_MASKED) <= set(files)
    assert "pressure" in folders

    _, logs = grade(PROC, {"files": files, "folders": folders})
    report = read_report(logs)

    assert report["found"] == []  # none writable
    expected = {name: fixed.get(name, "") for name in files}
    assert report["first"] == expected
    assert report["second"] == expected
    assert report["folders"] == {name: [] for name in folders}
    host_memory = Path("/proc/meminfo").read_text().splitlines()[0]
    assert host_memory not in report["first"]["meminfo"]


def test_ordinary_programs_still_run(grade: Grade) -> None:
    program = """
    import asyncio, concurrent.futures, multiprocessing, os, sqlite3, subprocess, sys
    import tempfile, threading
    found = []
    def check(name, attempt):
        try:
            if not attempt():
                found.append(name)
        except Exception as error:
            found.append(f"{name}: {error!r}")
    def threads():
        results = []
        workers = [threading.Thread(target=results.append, args=(n,)) for n in range(8)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return sorted(results) == list(range(8))
    def pool(method):
        with multiprocessing.get_context(method).Pool(2) as workers:
            return workers.map(abs, [-1, -2]) == [1, 2]
    def executor():
        with concurrent.futures.ProcessPoolExecutor(2) as workers:
            return list(workers.map(abs, [-3])) == [3]
    async def child():
        process = await asyncio.create_subprocess_exec("/bin/echo", "hi", stdout=-1)
        return (await process.communicate())[0] == b"hi\\n"
    def database():
        with tempfile.TemporaryDirectory() as folder:
            db = sqlite3.connect(os.path.join(folder, "x.db"))
            db.execute("create table t (x)")
            return db.execute("select count(*) from t").fetchone() == (0,)
    if __name__ == "__main__":
        check("threads", threads)
        check("subprocess", lambda: subprocess.run(["/bin/true"]).returncode == 0)
        for method in ("fork", "spawn", "forkserver"):
            check(f"multiprocessing {method}", lambda: pool(method))
        check("process pool", executor)
        check("asyncio subprocess", lambda: asyncio.run(child()))
        check("sqlite3", database)
        check("cpu_count", lambda: (os.cpu_count() or 0) >= 1)
        check("getloadavg", lambda: len(os.getloadavg()) == 3)
        check("semaphore", lambda: multiprocessing.Semaphore(1).acquire())
        open("metrics.json", "w").write('{"score": 1}')
        report(found)
    """
    status, logs = grade(program)

    assert read_report(logs)["found"] == []
    assert status == "completed"


def test_a_host_without_a_libseccomp_binding_cannot_sandbox() -> None:
    """The system interpreter without its site packages has neither binding: the probe says
    this host cannot sandbox and why, and a bubblewrap run refuses to start the program."""
    env = {"PYTHONPATH": str(ROOT)}
    probe = subprocess.run(
        ["/usr/bin/python3", "-S", "-m", "apps.grading.isolation", "probe"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert probe.returncode == 1
    result = json.loads(probe.stdout)
    assert result["isolation"] == "none"
    assert "seccomp filter cannot be built" in result["reason"]


def test_the_worker_grades_nothing_without_the_filter(
    user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No binding importable in the worker (as on a host without libseccomp) and DEBUG off:
    the attempt fails with the reason, and the program never runs."""
    for name in ("pyseccomp", "seccomp"):
        monkeypatch.setitem(sys.modules, name, None)  # import now raises ImportError
    seccomp_program.cache_clear()
    isolation_probe.cache_clear()
    submission = make_stored_submission(user, program=GOOD + "print('RAN', flush=True)\n")
    job = make_job(submission)
    try:
        grade_job(job.pk)
    finally:
        seccomp_program.cache_clear()
        isolation_probe.cache_clear()
    submission.refresh_from_db()
    job.refresh_from_db()

    assert submission.status == SubmissionStatus.FAILED
    assert "seccomp filter cannot be built" in submission.status_reason
    assert "GRADING_ALLOW_UNSANDBOXED" in submission.status_reason
    assert "RAN" not in job.logs
