"""The worker's side of the sandbox zygote: a launcher that forks each program instead of
starting two new interpreters (the supervisor and the program) per grading.

Each worker process keeps one zygote, `sandbox_supervisor.py --zygote`, started lazily with the
sandbox environment (never the worker's: no secrets, the fixed SANDBOX_PATH), in its own
session, and bound to the worker's life (PR_SET_PDEATHSIG). A grading sends it the program's
argv, working folder, environment and limits over a `SOCK_SEQPACKET` socket, with the write end
of the output pipe attached; the zygote forks a child that applies the limits and runs the
entrypoint, and reports the child's pid and then its exit status once the child's whole
process group is killed and reaped. The timeout, output cap and exit codes are the same as for
a spawned program: on the deadline the worker SIGKILLs the child's group itself.

Only the worker's main thread uses it, one grading at a time (the django-q2 worker runs its
tasks there; a zygote's parent-death signal follows the thread that started it). Anything else —
another thread, a zygote that cannot start or died before it took the request — returns None
and the caller spawns the program as before. A zygote that dies or stops answering while a
program runs is killed (with the program's group); the attempt fails with a reason and the
next grading starts a new zygote.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from apps.review.sandbox import (
    SUPERVISOR,
    Limits,
    ProcessOutcome,
    _kill_group,
    _OutputReader,
    sandbox_env,
)

logger = logging.getLogger(__name__)

# The zygote's own HOME/TMPDIR until a child takes its grading's environment: nothing there.
_ZYGOTE_HOME = Path("/nonexistent")
# How long a killed program's group may take to be reaped and reported by the zygote.
_REPORT_TIMEOUT = 10.0
# After a zygote failed to start or to take a request, spawn programs for this long.
_RETRY_AFTER = 60.0

LAUNCHER_DIED = (
    "The sandbox launcher stopped while the program ran; the program and everything it "
    "started were killed."
)


class _Zygote:
    def __init__(self) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(  # noqa: S603 - argv is built by us, no shell
                [
                    sys.executable,
                    str(SUPERVISOR),
                    "--zygote",
                    str(theirs.fileno()),
                    str(os.getpid()),
                ],
                cwd="/",
                env=sandbox_env(_ZYGOTE_HOME),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        self.channel = mine
        self.owner = os.getpid()

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is None

    def close(self) -> None:
        """Stop it (SIGTERM: it kills a running program's group first) and collect it."""
        self.channel.close()
        if self.owner != os.getpid():
            return  # inherited by a forked process: not ours to stop
        with contextlib.suppress(ProcessLookupError):
            self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def receive(self, timeout: float) -> dict[str, Any] | None:
        """The zygote's next message; None when it closed its end or said nothing in time."""
        with selectors.DefaultSelector() as selector:
            selector.register(self.channel, selectors.EVENT_READ)
            if not selector.select(timeout=max(0.0, timeout)):
                return None
        data = self.channel.recv(65536)
        if not data:
            return None
        message: dict[str, Any] = json.loads(data)
        return message


_lock = threading.Lock()
_zygote: _Zygote | None = None
_retry_at = 0.0


def _discard() -> None:
    global _zygote
    if _zygote is not None:
        zygote, _zygote = _zygote, None
        zygote.close()


def _failed(message: str) -> None:
    """Give up on the current zygote; spawn programs for a while."""
    global _retry_at
    logger.warning("grading: %s; programs are spawned for %.0f s", message, _RETRY_AFTER)
    _discard()
    _retry_at = time.monotonic() + _RETRY_AFTER


def _usable() -> bool:
    return threading.current_thread() is threading.main_thread() and (time.monotonic() >= _retry_at)


def _zygote_get() -> _Zygote | None:
    """This worker process's zygote, started if needed; None if it cannot start."""
    global _zygote
    if _zygote is not None and not _zygote.alive():
        _discard()
    if _zygote is None:
        try:
            _zygote = _Zygote()
        except OSError as exc:
            _failed(f"cannot start the sandbox zygote: {exc}")
            return None
    return _zygote


def zygote_warm() -> None:
    """Start this worker's zygote now (if it is to be used) so that it boots while the
    submission's files are copied; never blocks."""
    if _usable() and _lock.acquire(blocking=False):
        try:
            _zygote_get()
        finally:
            _lock.release()


def run_in_zygote(
    argv: list[str], *, cwd: Path, limits: Limits, timeout: float, max_output: int
) -> ProcessOutcome | None:
    """`run_sandboxed`'s contract, with the program forked by this worker's zygote.

    Returns None, having run nothing, when the zygote cannot be used (not the main thread,
    already busy, cannot start, died before it took the request): the caller spawns instead.
    """
    if not _usable() or not _lock.acquire(blocking=False):
        return None
    try:
        started = time.monotonic()
        zygote = _zygote_get()
        if zygote is None:
            return None
        request = {
            "argv": argv,
            "cwd": str(cwd),
            "env": sandbox_env(cwd),
            "limits": limits.spec(),
        }
        read_fd, write_fd = os.pipe()
        try:
            try:
                socket.send_fds(zygote.channel, [json.dumps(request).encode()], [write_fd])
            finally:
                os.close(write_fd)
        except OSError as exc:
            os.close(read_fd)
            _failed(f"the sandbox zygote did not take the request: {exc}")
            return None
        try:
            return _supervise(zygote, read_fd, started + timeout, started, max_output)
        except BaseException:
            _discard()  # e.g. django-q2's timeout inside the wait: the zygote kills the group
            raise
        finally:
            os.close(read_fd)
    finally:
        _lock.release()


def _supervise(
    zygote: _Zygote, read_fd: int, deadline: float, started: float, max_output: int
) -> ProcessOutcome | None:
    reader = _OutputReader(max_output)
    pid: int | None = None
    exit_code: int | None = None
    timed_out = lost = False
    with selectors.DefaultSelector() as selector:
        selector.register(read_fd, selectors.EVENT_READ, "output")
        selector.register(zygote.channel, selectors.EVENT_READ, "control")
        while exit_code is None and not lost:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in selector.select(timeout=min(remaining, 0.5)):
                if key.data == "output":
                    data = os.read(read_fd, 65536)
                    if data:
                        reader.feed(data)
                    else:
                        selector.unregister(read_fd)
                    continue
                message = zygote.receive(0)
                if message is None:
                    lost = True
                    break
                if "pid" in message:
                    pid = int(message["pid"])
                elif "status" in message:
                    exit_code = int(message["status"])
                    break
                else:
                    # Nothing was forked (a refused request or a failed fork): spawn instead.
                    _failed(f"the sandbox zygote refused the request: {message.get('error')}")
                    return None
    if timed_out:
        if pid is not None:
            _kill_group(pid)
        if pid is None or not _await_status(zygote):
            logger.warning("grading: the sandbox zygote did not report a killed program")
            _discard()
        return ProcessOutcome(
            exit_code=None,
            timed_out=True,
            logs=reader.text(),
            wall_seconds=time.monotonic() - started,
        )
    if lost:
        if pid is not None:
            _kill_group(pid)
        logger.warning("grading: the sandbox zygote stopped while a program ran")
        _discard()
        return ProcessOutcome(
            exit_code=None,
            timed_out=False,
            logs=reader.text(),
            wall_seconds=time.monotonic() - started,
            error=LAUNCHER_DIED,
        )
    # The zygote killed the group before reporting: drain what is left without blocking (a
    # process that left the group with setsid() could still hold the pipe open).
    os.set_blocking(read_fd, False)
    with contextlib.suppress(BlockingIOError, OSError):
        while data := os.read(read_fd, 65536):
            reader.feed(data)
    return ProcessOutcome(
        exit_code=exit_code,
        timed_out=False,
        logs=reader.text(),
        wall_seconds=time.monotonic() - started,
    )


def _await_status(zygote: _Zygote) -> bool:
    """After a kill: wait for the zygote's report that the group is dead and reaped."""
    until = time.monotonic() + _REPORT_TIMEOUT
    while (message := zygote.receive(until - time.monotonic())) is not None:
        if "status" in message:
            return True
    return False


def zygote_stop() -> None:
    """Stop this worker's zygote and forget past failures (tests; a worker's own exit stops
    it through the kernel)."""
    global _retry_at
    with _lock:
        _discard()
        _retry_at = 0.0
