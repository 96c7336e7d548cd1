"""Run one program under the limits, inside bubblewrap or (asked for by name) without it.

`run_program` takes paths, limits and argv and returns an `Outcome`; it never raises for
anything the program does. Nothing here imports Django.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import selectors
import signal
import stat
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from apps.grading.isolation.bubblewrap import InputFile, bwrap_argv, runner_argv, sandbox_env
from apps.grading.isolation.limits import (
    MAX_METRICS_BYTES,
    OUTPUT_KILL_FACTOR,
    PYTHON_FLAGS,
    Limits,
)
from apps.grading.isolation.metrics_file import read_metrics_file
from apps.grading.isolation.surface import SeccompUnavailable, sandbox_surface

BUBBLEWRAP = "bubblewrap"
NONE = "none"
METRICS_FILE = "metrics.json"
# Under a root worker the sandbox runs as an unprivileged host uid of its own, chosen per worker
# process (a worker grades one submission at a time), so concurrent gradings never share a
# process budget. No passwd entry is needed.
SANDBOX_UID_BASE = 60000
SANDBOX_UID_SPAN = 5000
# The runner's exit status when the files could not be copied in (scratch too small).
COPY_FAILED = 125
# How often the logs so far are handed to `on_output` while a program prints.
OUTPUT_PROGRESS_SECONDS = 1.0
SETPRIV = "/usr/bin/setpriv"

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def sandbox_host_uid() -> int | None:
    """The host uid a root worker gives its sandboxes; None when the worker is not root (the
    sandbox then keeps the worker's own uid, unprivileged already)."""
    if os.geteuid() != 0:
        return None
    return SANDBOX_UID_BASE + os.getpid() % SANDBOX_UID_SPAN


def tasks_of_uid(uid: int) -> int:
    """Threads and processes the kernel counts against `uid`'s RLIMIT_NPROC right now."""
    count = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if entry.stat().st_uid == uid:
                        count += len(os.listdir(f"/proc/{entry.name}/task"))
    return count


@dataclass
class Outcome:
    """What happened. `exit_code` is negative for a fatal signal; `metrics` holds the bytes of
    a regular `metrics.json`, or None with `metrics_problem` saying why there are none."""

    exit_code: int | None
    timed_out: bool
    logs: str
    wall_seconds: float
    metrics: bytes | None = None
    metrics_problem: str = ""
    # Set when the program was stopped for printing too much, or its sandbox could not start or
    # report: the attempt fails with this reason.
    error: str = ""


class _Output:
    """Keeps the first `limit` bytes of the logs, counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        room = self.limit - len(self.kept)
        if room > 0:
            self.kept += data[:room]
        self.dropped += max(0, len(data) - max(room, 0))

    @property
    def total(self) -> int:
        return len(self.kept) + self.dropped

    def text(self) -> str:
        text = self.kept.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
        if self.dropped:
            text += f"\n[output truncated: {self.dropped} more bytes not kept]\n"
        return text


def _rlimits(limits: Limits, *, processes: int) -> list[tuple[int, int]]:
    return [
        (resource.RLIMIT_CPU, max(1, limits.cpu_seconds)),
        (resource.RLIMIT_AS, limits.memory_bytes),
        (resource.RLIMIT_FSIZE, limits.file_bytes),
        (resource.RLIMIT_NPROC, processes),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CORE, 0),
    ]


def _child_setup(rlimits: list[tuple[int, int]]) -> Callable[[], None]:
    """Runs in the forked child after its uid change, before exec: hard and soft limits (a
    program can lower them, never raise them), and SIGKILL when the worker dies."""
    setrlimit = resource.setrlimit
    prctl = _libc.prctl

    def setup() -> None:
        for which, value in rlimits:
            setrlimit(which, (value, value))
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return setup


def run_program(
    *,
    isolation: str,
    input_dir: Path,
    program: Sequence[str],
    limits: Limits,
    python: str,
    readonly_paths: Sequence[str] = (),
    bwrap: str | None = None,
    on_output: Callable[[str], None] | None = None,
) -> Outcome:
    """Run `python -E -s *program` with a copy of `input_dir` as its working folder.

    `isolation="bubblewrap"`: inside a new sandbox (see `bubblewrap`); `input_dir` is only read.
    `isolation="none"`: directly in `input_dir`, with the same rlimits, environment and uid but
    no namespaces — the program can read whatever that uid can. Only for a development machine
    without bubblewrap, and only when the operator asked for it.

    A root worker runs either as `sandbox_host_uid()` (real = effective = saved, no
    supplementary groups); `input_dir` must be traversable by that uid.

    `on_output(logs so far)` is called while the program runs, at most every
    `OUTPUT_PROGRESS_SECONDS`, when it printed something new (live logs).
    """
    host_uid = sandbox_host_uid()
    started = time.monotonic()
    if isolation == BUBBLEWRAP:
        if bwrap is None:
            raise ValueError("isolation='bubblewrap' needs the bwrap binary's path")
        # No preexec_fn and no `user=`: either makes subprocess fork the whole worker instead
        # of vfork (about 14 ms for a 200 MB worker). A root worker switches uid with
        # util-linux's setpriv instead; the rlimits are set inside (see `runner_argv`).
        launcher = [bwrap]
        if host_uid is not None:
            launcher = [
                SETPRIV,
                f"--reuid={host_uid}",
                f"--regid={host_uid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--",
                bwrap,
            ]
        with _input_files(input_dir) as (files, folders, size), contextlib.ExitStack() as stack:
            try:  # the seccomp filter and the /proc masks: no sandbox runs without them
                surface = stack.enter_context(sandbox_surface(limits))
            except SeccompUnavailable as error:
                return Outcome(
                    exit_code=None, timed_out=False, logs="", wall_seconds=0.0, error=str(error)
                )
            if size > limits.scratch_bytes:
                return Outcome(
                    exit_code=COPY_FAILED,
                    timed_out=False,
                    logs="",
                    wall_seconds=0.0,
                    error="The submission's files do not fit in the sandbox's scratch space.",
                )
            return _run_bubblewrap(
                launcher=launcher,
                options=[
                    *bwrap_argv(
                        input_dir=input_dir,
                        limits=limits,
                        readonly_paths=readonly_paths,
                        files=files,
                        folders=folders,
                    ),
                    *surface.args,
                ],
                command=runner_argv(python=python, program=program, limits=limits),
                limits=limits,
                started=started,
                extra_fds=(*(f.fd for f in files or ()), *surface.fds),
                on_output=on_output,
            )
    if isolation == NONE:
        # A non-root worker shares its uid with the program: the budget comes on top of what
        # that uid already runs.
        processes = (
            limits.processes
            if host_uid is not None
            else limits.processes + tasks_of_uid(os.getuid())
        )
        identity: dict[str, object] = {}
        if host_uid is not None:
            identity = {"user": host_uid, "group": host_uid, "extra_groups": []}
        return _run_unisolated(
            argv=[python, *PYTHON_FLAGS, *program],
            cwd=input_dir,
            limits=limits,
            setup=_child_setup(_rlimits(limits, processes=processes)),
            identity=identity,
            started=started,
            on_output=on_output,
        )
    raise ValueError(f"unknown isolation {isolation!r}")


# Up to this many files are handed to bubblewrap as open descriptors and written into the
# sandbox by bubblewrap itself; more are copied by the runner from a read-only mount.
MAX_FILES_AS_DESCRIPTORS = 64


@contextlib.contextmanager
def _input_files(
    root: Path,
) -> Iterator[tuple[list[InputFile] | None, list[str], int]]:
    """(files as open descriptors or None, their folders, total bytes) of a prepared input
    folder. Nothing in it is a link (the worker wrote it); descriptors are closed on exit."""
    files: list[tuple[Path, bool]] = []
    folders: list[str] = []
    size = 0
    for folder, dirs, names in os.walk(root):
        base = Path(folder)
        folders += [str((base / d).relative_to(root)) for d in sorted(dirs)]
        for name in names:
            status = os.lstat(base / name)
            size += status.st_size
            files.append((base / name, bool(status.st_mode & stat.S_IXUSR)))
    if len(files) > MAX_FILES_AS_DESCRIPTORS:
        yield None, [], size
        return
    opened: list[InputFile] = []
    try:
        for path, executable in files:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            opened.append(InputFile(fd, str(path.relative_to(root)), executable))
        yield opened, folders, size
    finally:
        for file in opened:
            os.close(file.fd)


def _pump(
    process: subprocess.Popen[bytes],
    *,
    logs: _Output,
    result: bytearray | None,
    limits: Limits,
    started: float,
    on_output: Callable[[str], None] | None = None,
) -> tuple[bool, bool]:
    """Read the logs (and the result channel) until both close, the wall clock passes or the
    output passes its kill limit. Returns (timed_out, output_exceeded).

    With a result channel the logs are the process's stderr and the result its stdout;
    without, the logs are its stdout (stderr joined to it)."""
    assert process.stdout is not None  # noqa: S101 - PIPE
    if result is None:
        streams = {process.stdout.fileno(): "logs"}
    else:
        assert process.stderr is not None  # noqa: S101 - PIPE
        streams = {process.stderr.fileno(): "logs", process.stdout.fileno(): "result"}
    deadline = started + limits.wall_seconds
    kill_at = limits.output_bytes * OUTPUT_KILL_FACTOR
    reported = 0  # bytes of logs `on_output` has seen
    next_report = time.monotonic() + OUTPUT_PROGRESS_SECONDS
    with selectors.DefaultSelector() as selector:
        for fd in streams:
            selector.register(fd, selectors.EVENT_READ)
        while streams:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True, False
            for key, _ in selector.select(timeout=min(remaining, 0.5)):
                fd = int(key.fd)
                data = os.read(fd, 65536)
                if not data:
                    selector.unregister(fd)
                    del streams[fd]
                elif streams[fd] == "logs":
                    logs.feed(data)
                    if logs.total > kill_at:
                        return False, True
                elif result is not None and len(result) <= MAX_METRICS_BYTES + 64:
                    result += data
            if on_output is not None and logs.total > reported and time.monotonic() >= next_report:
                reported = logs.total
                next_report = time.monotonic() + OUTPUT_PROGRESS_SECONDS
                on_output(logs.text())
            if result is None and process.poll() is not None:
                # Unisolated: the program exited but something it forked keeps the pipe open.
                return False, False
    return False, False


def _end(process: subprocess.Popen[bytes], *, group: bool) -> None:
    """SIGKILL the process (and its group, unisolated) and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


def _run_bubblewrap(
    *,
    launcher: list[str],
    options: list[str],
    command: list[str],
    limits: Limits,
    started: float,
    extra_fds: tuple[int, ...] = (),
    on_output: Callable[[str], None] | None = None,
) -> Outcome:
    # The options go through a pipe (`--args FD`): the sandbox's PID 1 is bubblewrap, and its
    # command line, readable inside, then shows no host path. `--info-fd` tells the host pid
    # of that PID 1.
    args_read, args_write = os.pipe()
    info_read, info_write = os.pipe()
    try:
        options = [*options, "--info-fd", str(info_write)]
        payload = b"".join(arg.encode() + b"\0" for arg in options)
        if len(payload) > 60000:  # the pipe must not block before bubblewrap reads it
            raise ValueError("too many sandbox arguments")
        os.write(args_write, payload)
        os.close(args_write)
        args_write = -1
        process = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
            [*launcher, "--args", str(args_read), "--", *command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={},  # bubblewrap becomes the sandbox's PID 1: its environ is readable inside
            cwd="/",
            pass_fds=(args_read, info_write, *extra_fds),
            # Out of the worker's process group: a signal to the group (a stopping cluster)
            # must not kill bubblewrap before `_end_sandbox` has killed PID 1 and waited for
            # it, or the worker could return while the sandbox is still being torn down.
            start_new_session=True,
        )
    finally:
        os.close(args_read)
        os.close(info_write)
        if args_write >= 0:
            os.close(args_write)
    logs = _Output(limits.output_bytes)
    result = bytearray()
    try:
        timed_out, exceeded = _pump(
            process,
            logs=logs,
            result=result,
            limits=limits,
            started=started,
            on_output=on_output,
        )
    finally:
        _end_sandbox(process, info_read)
    outcome = Outcome(
        exit_code=None,
        timed_out=timed_out,
        logs=logs.text(),
        wall_seconds=time.monotonic() - started,
    )
    if timed_out:
        return outcome
    if exceeded:
        outcome.error = (
            f"The program printed more than {limits.output_bytes * OUTPUT_KILL_FACTOR} bytes "
            "and was stopped."
        )
        return outcome
    _parse_result(bytes(result), outcome, bwrap_status=process.returncode)
    return outcome


def _end_sandbox(process: subprocess.Popen[bytes], info_read: int) -> None:
    """End the sandbox and return only once none of its processes is left.

    SIGKILL to the sandbox's PID 1 makes the kernel kill every process of its PID namespace,
    and PID 1 finishes exiting only after all of them are gone; bubblewrap, its parent, exits
    after reaping it. Waiting for bubblewrap therefore waits for the whole sandbox. Before
    PID 1 exists (bubblewrap still setting up), killing bubblewrap suffices: --die-with-parent.
    """
    try:
        if process.poll() is None:
            child = _sandbox_pid1(info_read)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL) if child else process.kill()
        process.wait()
    finally:
        os.close(info_read)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _sandbox_pid1(info_read: int) -> int | None:
    """The host pid of the sandbox's PID 1 from bubblewrap's `--info-fd` JSON, if written."""
    os.set_blocking(info_read, False)
    try:
        raw = os.read(info_read, 4096)
    except BlockingIOError:
        return None
    try:
        pid = json.loads(raw).get("child-pid")
    except (ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) and pid > 1 else None


def _parse_result(raw: bytes, outcome: Outcome, *, bwrap_status: int) -> None:
    """Read the runner's report (see `bubblewrap.RUNNER`) into `outcome`."""
    head, _, rest = raw.partition(b"\n")
    try:
        status = int(head.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        # The runner never reported: the sandbox could not start, or the program killed it.
        outcome.exit_code = bwrap_status
        outcome.error = (
            "The sandbox ended without reporting a result "
            f"(bubblewrap exit status {bwrap_status}); see the logs."
        )
        return
    if status == COPY_FAILED:
        outcome.exit_code = status
        outcome.error = "The submission's files do not fit in the sandbox's scratch space."
        return
    # sh reports a fatal signal n as 128 + n.
    outcome.exit_code = -(status - 128) if 128 < status < 128 + 65 else status
    kind, payload = rest[:1], rest[1:]
    if kind == b"F":
        if len(payload) > MAX_METRICS_BYTES:
            outcome.metrics_problem = f"metrics.json is larger than {MAX_METRICS_BYTES} bytes."
        else:
            outcome.metrics = payload
    elif kind in (b"L", b"S"):
        outcome.metrics_problem = "metrics.json is not a regular file."


def _run_unisolated(
    *,
    argv: list[str],
    cwd: Path,
    limits: Limits,
    setup: Callable[[], None],
    identity: dict[str, object],
    started: float,
    on_output: Callable[[str], None] | None = None,
) -> Outcome:
    process = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
        argv,
        cwd=cwd,
        env=sandbox_env(home=str(cwd), tmp=str(cwd)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=setup,
        **identity,  # type: ignore[call-overload]
    )
    logs = _Output(limits.output_bytes)
    try:
        timed_out, exceeded = _pump(process, logs=logs, result=None, limits=limits, started=started)
    finally:
        _end(process, group=True)
    outcome = Outcome(
        exit_code=process.returncode,
        timed_out=timed_out,
        logs=logs.text(),
        wall_seconds=time.monotonic() - started,
    )
    if exceeded:
        outcome.error = (
            f"The program printed more than {limits.output_bytes * OUTPUT_KILL_FACTOR} bytes "
            "and was stopped."
        )
    if not (timed_out or exceeded):
        outcome.metrics, outcome.metrics_problem = read_metrics_file(cwd / METRICS_FILE)
    return outcome
