"""What a sandboxed program may spend (`Limits`, plain data), and how those bounds and the
sandbox's host uid are set on a process. No Django."""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
from collections.abc import Callable
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Limits:
    """Every bound a grading runs under, each enforced by the kernel.

    - `wall_seconds`: the worker kills the whole sandbox when it passes.
    - `cpu_seconds`: RLIMIT_CPU of every process in it (SIGXCPU, then SIGKILL).
    - `memory_bytes`: RLIMIT_AS of every process in it.
    - `file_bytes`: RLIMIT_FSIZE, the largest file any process may write.
    - `scratch_bytes`: size of the RAM-backed tmpfs holding the working folder and /tmp: every
      byte the program can write, its own files included.
    - `shm_bytes`: size of the tmpfs at /dev/shm (POSIX semaphores and shared memory).
    - `processes`: RLIMIT_NPROC, tasks (threads included) of the sandbox's host uid.
    - `open_files`: RLIMIT_NOFILE.
    - `output_bytes`: stdout and stderr kept as the logs; a program that prints more than
      `OUTPUT_KILL_FACTOR` times this is killed.
    """

    wall_seconds: float
    cpu_seconds: int
    memory_bytes: int
    file_bytes: int
    scratch_bytes: int
    processes: int
    open_files: int = 256
    output_bytes: int = 1024 * 1024
    shm_bytes: int = 64 * 1024 * 1024

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


# A program that prints past this many times `output_bytes` has nothing more worth keeping and
# would only keep the worker busy draining its pipe: the sandbox is killed.
OUTPUT_KILL_FACTOR = 16
# How the interpreter starts: `-I` without its `-P`. No PYTHON* environment variable and no
# user site-packages are read (`-E -s`), but the program's own folder is on `sys.path`, as with
# `python main.py`: a submission imports its own modules. The platform's code stays out because
# the sandbox does not contain it, not because of a flag.
PYTHON_FLAGS = ("-E", "-s")
# `metrics.json` larger than this is refused.
MAX_METRICS_BYTES = 1024 * 1024


# --- How the bounds are set on a process ------------------------------------------------------

# Under a root worker the sandbox runs as an unprivileged host uid of its own, chosen per worker
# process (a worker grades one submission at a time), so concurrent gradings never share a
# process budget. No passwd entry is needed.
SANDBOX_UID_BASE = 60000
SANDBOX_UID_SPAN = 5000

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


def rlimits(limits: Limits, *, processes: int) -> list[tuple[int, int]]:
    """The rlimits of an unisolated run (inside bubblewrap `runner_argv` sets the same ones)."""
    return [
        (resource.RLIMIT_CPU, max(1, limits.cpu_seconds)),
        (resource.RLIMIT_AS, limits.memory_bytes),
        (resource.RLIMIT_FSIZE, limits.file_bytes),
        (resource.RLIMIT_NPROC, processes),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CORE, 0),
    ]


def child_setup(values: list[tuple[int, int]]) -> Callable[[], None]:
    """Runs in the forked child after its uid change, before exec: hard and soft limits (a
    program can lower them, never raise them), and SIGKILL when the worker dies."""
    setrlimit = resource.setrlimit
    prctl = _libc.prctl

    def setup() -> None:
        for which, value in values:
            setrlimit(which, (value, value))
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return setup
