"""The sandbox supervisor: the grader worker's direct child, standard library only.

Run as `python -I -S sandbox_supervisor.py <limits> <program argv...>` in a new session, where
`<limits>` is `key=value` pairs joined by commas (see `Limits.spec`). It asks the kernel for
SIGTERM when the worker dies (PR_SET_PDEATHSIG) and then kills its whole process group —
itself, the program and everything the program forked — so a worker killed mid-grade (SIGKILL,
OOM killer, a cluster crash) leaves nothing running. The program itself cannot keep that
setting: its exec changes its real uid, which clears it.

The program runs as the supervisor's child with the rlimits applied between fork and exec, and
the supervisor exits with the program's status (re-raising a fatal signal on itself).

Zygote mode, `python sandbox_supervisor.py --zygote <socket fd> <worker pid>` (no `-I -S`: it
starts exactly like `python <entrypoint>` would, site-packages included), is a long-lived launcher
a worker process keeps so that a grading costs a fork instead of two interpreter start-ups. It
is started with the sandbox environment, serves one request at a time on a `SOCK_SEQPACKET`
socket (the program's output pipe comes with the request, `SCM_RIGHTS`) and forks one child per
grading. The child makes its own session, applies the same limits, takes the grading's
environment, folder and argv, and runs the entrypoint as `__main__` the way `python <entrypoint>`
does (a zip application through `runpy.run_path`); it exits as the interpreter would, observably
(SystemExit statuses, tracebacks, non-daemon threads, atexit, the program's own modules and
garbage finalized), without tearing down the launcher's modules (see `zygote_child_exit`). The
zygote itself never runs submitted code, so nothing a program changes reaches the next one.
When the child exits, the zygote kills its whole group, reaps it and reports the exit status;
it dies with the worker (PR_SET_PDEATHSIG) after killing the group of a child still running,
and a child dies with the zygote.
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and not sys.flags.safe_path:
    # Zygote mode runs without -I: never import from this file's folder (the platform's code,
    # with modules named like the standard library's).
    del sys.path[0]

import ctypes
import gc
import json
import os
import resource
import signal
import socket
import time
from typing import Any

_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_CAP_SYS_ADMIN = 21
_CAP_SYS_RESOURCE = 24
_PR_SET_CHILD_SUBREAPER = 36
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def drop_capabilities(capabilities: tuple[int, ...]) -> None:
    """Remove `capabilities` from this process's effective, permitted and inheritable sets
    (capset(2)). Dropping them from the bounding set only takes effect at the next exec; a
    zygote's child never execs, so it must lose them here too."""
    libc = ctypes.CDLL(None, use_errno=True)
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    for capability in capabilities:
        index, bit = divmod(capability, 32)
        mask = ~(1 << bit) & 0xFFFFFFFF
        data[index].effective &= mask
        data[index].permitted &= mask
        data[index].inheritable &= mask
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


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
    capabilities leave its bounding set (so an exec cannot bring them back) and its effective
    and permitted sets (a zygote's child never execs). Its effective uid stays 0 so it can run
    the worker's interpreter wherever it is installed; file-system isolation is a container's
    job.
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
    if uid is not None:
        # Last: without CAP_SYS_RESOURCE no limit above could have been raised.
        drop_capabilities((_CAP_SYS_ADMIN, _CAP_SYS_RESOURCE))


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


# --- Zygote mode ---------------------------------------------------------------------------------

_MAX_REQUEST = 1024 * 1024
_current_child = 0  # the pid (= process group) of the program being run, 0 when idle


def _zygote_die(signum: int = 0, frame: Any = None) -> None:
    """The worker died (PR_SET_PDEATHSIG) or asked us to stop: kill the running program's whole
    group, then leave."""
    if _current_child:
        with _suppress_os_errors():
            os.killpg(_current_child, signal.SIGKILL)
    os._exit(0)


class _suppress_os_errors:  # noqa: N801 - contextlib is one import more in every program
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> bool:
        return kind is not None and issubclass(kind, OSError)


def reap_group(pgid: int, *, wait: float = 5.0) -> None:
    """Collect the killed group's orphans (re-parented to us, a subreaper) until none is left.

    Also used by the worker (`apps.review.sandbox`), which is the subreaper of spawned programs;
    this file imports only the standard library, so it can be run and imported alike."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.005)


def _reap_strays() -> None:
    """Reap any other exited orphan (one that left its group with setsid())."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _send(channel: socket.socket, message: dict[str, Any]) -> None:
    channel.send(json.dumps(message).encode())


def zygote_serve(channel: socket.socket, worker_pid: int) -> tuple[dict[str, Any], int]:
    """Serve launch requests until the worker closes the socket (then exit). Returns only in a
    forked child: its request and the output pipe's write end."""
    global _current_child
    signal.signal(signal.SIGTERM, _zygote_die)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != worker_pid:
        _zygote_die()  # the worker died before we asked to be told
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    while True:
        _reap_strays()
        data, fds, _flags, _address = socket.recv_fds(channel, _MAX_REQUEST, 1)
        if not data:
            os._exit(0)  # the worker closed its end
        try:
            request = json.loads(data)
            if len(fds) != 1:
                raise ValueError("a request carries exactly one file descriptor")
        except ValueError as exc:
            for fd in fds:
                os.close(fd)
            _send(channel, {"error": str(exc)})
            continue
        output = fds[0]
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(output)
            _send(channel, {"error": f"fork failed: {exc}"})
            continue
        if pid == 0:
            channel.close()
            return request, output
        _current_child = pid
        os.close(output)
        _send(channel, {"pid": pid})
        # Wait without reaping: the zombie keeps its pid (= the group id) from being reused
        # while the group is killed, here or by the worker on a timeout.
        while True:
            try:
                os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
                break
            except ChildProcessError:
                break
        with _suppress_os_errors():
            os.killpg(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        _current_child = 0
        reap_group(pid)
        _send(channel, {"status": os.waitstatus_to_exitcode(status)})


def _close_inherited_fds() -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            with _suppress_os_errors():
                os.close(fd)


def zygote_child_prepare(request: dict[str, Any], output: int, zygote_pid: int) -> str:
    """In the forked child: become the sandboxed program's process (own session, output pipe,
    limits, environment, folder, argv, sys.path) and return the entrypoint to run."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    _close_inherited_fds()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    apply_limits(parse_spec(request["limits"]))
    # After the uid change, which could clear it: die with the zygote.
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != zygote_pid:
        os._exit(127)
    argv = list(request["argv"])
    entry = argv[0]
    sys.argv = argv
    sys.orig_argv = [sys.executable, *argv]
    # `python <entry>` puts the entrypoint's folder first on sys.path; a zip application puts
    # itself there, which run_path does.
    from pkgutil import get_importer

    path = os.path.abspath(str(entry))
    if get_importer(path) is None:
        sys.path.insert(0, os.path.dirname(os.path.realpath(path)))
    return path


def _run_main(path: str) -> None:
    """What `python <path>` does with a source file: a fresh `__main__` module (absolute
    `__file__`, a SourceFileLoader, no spec), the code compiled under that name; sys.argv is
    left as given. Anything else a path can be (a zip application) goes to runpy."""
    import runpy
    import types
    from importlib.machinery import SourceFileLoader
    from pkgutil import get_importer

    if get_importer(path) is not None:
        runpy.run_path(path, run_name="__main__")
        return
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__cached__ = None  # type: ignore[attr-defined]
    main.__loader__ = SourceFileLoader("__main__", path)
    main.__builtins__ = __builtins__  # type: ignore[attr-defined]
    main.__annotations__ = {}
    sys.modules["__main__"] = main
    with open(path, "rb") as source:
        code = compile(source.read(), path, "exec")
    exec(code, main.__dict__)  # noqa: S102 - this is the program the grading runs


def zygote_child_run(entry: str) -> None:
    """Run the entrypoint (an absolute path, as `__file__` is under `python <entry>`) as
    `__main__`. An uncaught exception is reported like the interpreter does (without this
    launcher's frames) and exits with status 1."""
    try:
        _run_main(entry)
    except SystemExit:
        raise
    except BaseException as exc:
        traceback = exc.__traceback__
        while traceback is not None and traceback.tb_frame.f_code.co_filename != entry:
            traceback = traceback.tb_next
        sys.excepthook(type(exc), exc.with_traceback(traceback), traceback)
        raise SystemExit(1) from None


def _exit_status(exc: SystemExit) -> int:
    """The status the interpreter exits with for an uncaught SystemExit: None -> 0, an int as
    it is, anything else printed to stderr -> 1."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    with _suppress_os_errors():
        if sys.stderr is not None:
            sys.stderr.write(f"{code}\n")
            sys.stderr.flush()
    return 1


def _clear_module(module: Any) -> None:
    """What the interpreter does to a module at exit: names set to None, `_`-names first,
    `__builtins__` kept, so finalizers that run meanwhile still find the builtins."""
    namespace = getattr(module, "__dict__", None)
    if not isinstance(namespace, dict):
        return
    for private in (True, False):
        for name in list(namespace):
            if name != "__builtins__" and name.startswith("_") == private:
                namespace[name] = None


def zygote_child_exit(status: int, preloaded: set[str]) -> None:
    """End the program's process as the interpreter's exit would, observably, without tearing
    down the launcher's own modules (which would write to, and so copy, most of the memory
    shared with the zygote: about half of a trivial program's cost).

    In order: non-daemon threads are joined, atexit handlers run, the program's `__main__` and
    the modules it imported are cleared and its garbage collected (so an unclosed file's
    buffer is written, as at a normal exit), stdout/stderr flushed (a failure -> status 120),
    then `os._exit`. Objects a program hangs on modules the launcher had already loaded are
    not finalized; the language never promised `__del__` at exit.
    """
    try:
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()
        import atexit

        atexit._run_exitfuncs()
        program = [m for name, m in sys.modules.items() if name not in preloaded]
        for module in [sys.modules.get("__main__"), *reversed(program)]:
            _clear_module(module)
        del program
        gc.collect()
    except BaseException as exc:
        if isinstance(exc, SystemExit):
            status = _exit_status(exc)
        with _suppress_os_errors():
            sys.excepthook(type(exc), exc, exc.__traceback__)
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # the interpreter ignores these too
            if stream is sys.stdout and status == 0:
                status = 120
    os._exit(status & 0xFF)


def zygote_main() -> None:
    """`--zygote <fd> <worker pid>`: serve; in each forked child, run the program."""
    channel = socket.socket(fileno=int(sys.argv[2]))
    worker_pid = int(sys.argv[3])
    zygote_pid = os.getpid()
    # Loaded once here rather than in every child.
    import pkgutil  # noqa: F401
    import runpy  # noqa: F401
    import types  # noqa: F401
    from importlib import machinery  # noqa: F401

    # Everything the zygote holds is out of the collector's reach in its children: a child's
    # collections (and its exit) then never touch, and so never copy, the shared pages.
    # Measured: 13-16 ms -> 9 ms per trivial program.
    gc.freeze()

    request, output = zygote_serve(channel, worker_pid)
    try:
        entry = zygote_child_prepare(request, output, zygote_pid)
    except BaseException as exc:
        os.write(2, f"sandbox: cannot start the program: {exc}\n".encode())
        os._exit(127)
    del request, output, channel
    preloaded = set(sys.modules)
    try:
        zygote_child_run(entry)
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc)
    zygote_child_exit(status, preloaded)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--zygote"]:
        zygote_main()
    else:
        sys.exit(main())
