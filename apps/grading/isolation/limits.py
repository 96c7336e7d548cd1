"""What a sandboxed program may spend. Plain data: no Django, no I/O."""

from __future__ import annotations

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
