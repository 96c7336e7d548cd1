"""The sandbox supervisor: the grader worker's direct child, standard library only.

Run as `python -I -S sandbox_supervisor.py <limits> <program argv...>` in a new session, where
`<limits>` is `key=value` pairs joined by commas (see `Limits.spec`). It asks the kernel for
SIGTERM when the worker dies (PR_SET_PDEATHSIG) and then kills its whole process group —
itself, the program and everything the program forked — so a worker killed mid-grade (SIGKILL,
OOM killer, a cluster crash) leaves nothing running. The program itself cannot keep that
setting: its exec changes its real uid, which clears it.

The program runs as the supervisor's child with the rlimits applied between fork and exec, and
the supervisor exits with the program's status (re-raising a fatal signal on itself).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
from typing import Any

_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_CAP_SYS_ADMIN = 21
_CAP_SYS_RESOURCE = 24


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def parse_spec(text: str) -> dict[str, int | None]:
    """`cpu_seconds=3,drop_to_uid=,...` -> {"cpu_seconds": 3, "drop_to_uid": None, ...}."""
    spec: dict[str, int | None] = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        spec[key] = int(value) if value else None
    return spec


def apply_limits(spec: dict[str, Any]) -> None:
    """rlimits for the program (between fork and exec).

    The kernel exempts from RLIMIT_NPROC a process whose real user is root or that holds
    CAP_SYS_RESOURCE / CAP_SYS_ADMIN. Under a root worker the program's real uid becomes the
    worker's unprivileged sandbox uid (whose task count the limit then caps) and those two
    capabilities leave its
    bounding set (gone after exec). Its effective uid stays 0 so it can run the worker's
    interpreter wherever it is installed; file-system isolation is a container's job.
    """
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    cpu = int(spec["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = int(spec["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    size = int(spec["file_bytes"])
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    files = int(spec["open_files"])
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    uid = spec.get("drop_to_uid")
    if uid is not None:
        for capability in (_CAP_SYS_ADMIN, _CAP_SYS_RESOURCE):
            _prctl(_PR_CAPBSET_DROP, capability)
        os.setresuid(int(uid), 0, 0)
    processes = int(spec["processes"])
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))


def _kill_everything(signum: int = 0, frame: Any = None) -> None:
    os.killpg(0, signal.SIGKILL)


def main() -> int:
    spec = parse_spec(sys.argv[1])
    argv = sys.argv[2:]
    signal.signal(signal.SIGTERM, _kill_everything)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != spec["worker_pid"]:
        _kill_everything()  # the worker died before we asked to be told
    pid = os.fork()
    if pid == 0:
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            apply_limits(spec)
            os.execv(argv[0], argv)  # noqa: S606 - argv is the grader's, no shell
        except BaseException as exc:
            os.write(2, f"sandbox: cannot start the program: {exc}\n".encode())
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
