"""The processes of one run: starting them, reading their output under the limits, ending them.

Nothing here decides what a run means: `run` turns what these functions saw into an `Outcome`.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from apps.grading.isolation.limits import MAX_METRICS_BYTES, OUTPUT_KILL_FACTOR, Limits

# How often the logs so far are handed to `on_output` while a program prints.
OUTPUT_PROGRESS_SECONDS = 1.0
# The options go through a pipe that must not block before bubblewrap reads it.
MAX_OPTIONS_BYTES = 60000


class Output:
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


@dataclass
class Pumped:
    """What `pump` read: the logs, the result channel's bytes (in memory, or in `spool` up to
    `spool_cap` bytes when the channel also carries an output folder), and why it stopped
    early."""

    logs: Output
    result: bytearray
    timed_out: bool = False
    output_exceeded: bool = False
    spool: IO[bytes] | None = None
    spool_cap: int = 0
    spool_overflow: bool = False


class _Progress:
    """Hands the logs so far to `on_output` at most every `OUTPUT_PROGRESS_SECONDS`, when they
    grew (live logs)."""

    def __init__(self, on_output: Callable[[str], None] | None) -> None:
        self.on_output = on_output
        self.reported = 0
        self.next_report = time.monotonic() + OUTPUT_PROGRESS_SECONDS

    def tick(self, logs: Output) -> None:
        if self.on_output is None or logs.total <= self.reported:
            return
        if time.monotonic() >= self.next_report:
            self.reported = logs.total
            self.next_report = time.monotonic() + OUTPUT_PROGRESS_SECONDS
            self.on_output(logs.text())


def pump(
    process: subprocess.Popen[bytes],
    *,
    limits: Limits,
    started: float,
    result_channel: bool,
    on_output: Callable[[str], None] | None = None,
    spool: IO[bytes] | None = None,
    spool_cap: int = 0,
) -> Pumped:
    """Read the logs (and the result channel) until both close, the wall clock passes or the
    output passes its kill limit.

    With a result channel the logs are the process's stderr and the result its stdout;
    without, the logs are its stdout (stderr joined to it)."""
    assert process.stdout is not None  # noqa: S101 - PIPE
    streams = {process.stdout.fileno(): "logs"}
    if result_channel:
        assert process.stderr is not None  # noqa: S101 - PIPE
        streams = {process.stderr.fileno(): "logs", process.stdout.fileno(): "result"}
    seen = Pumped(Output(limits.output_bytes), bytearray(), spool=spool, spool_cap=spool_cap)
    deadline = started + limits.wall_seconds
    progress = _Progress(on_output)
    with selectors.DefaultSelector() as selector:
        for fd in streams:
            selector.register(fd, selectors.EVENT_READ)
        while streams:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                seen.timed_out = True
                return seen
            for key, _ in selector.select(timeout=min(remaining, 0.5)):
                if not _read(int(key.fd), streams, selector, seen, limits):
                    seen.output_exceeded = True
                    return seen
            progress.tick(seen.logs)
            if not result_channel and process.poll() is not None:
                # Unisolated: the program exited but something it forked keeps the pipe open.
                return seen
    return seen


def _read(
    fd: int,
    streams: dict[int, str],
    selector: selectors.BaseSelector,
    seen: Pumped,
    limits: Limits,
) -> bool:
    """Read what one stream has; False once the logs pass their kill limit."""
    data = os.read(fd, 65536)
    if not data:
        selector.unregister(fd)
        del streams[fd]
    elif streams[fd] == "logs":
        seen.logs.feed(data)
        if seen.logs.total > limits.output_bytes * OUTPUT_KILL_FACTOR:
            return False
    elif seen.spool is not None:
        if seen.spool.tell() + len(data) > seen.spool_cap:
            seen.spool_overflow = True
        else:
            seen.spool.write(data)
    elif len(seen.result) <= MAX_METRICS_BYTES + 64:
        seen.result += data
    return True


# --- bubblewrap -------------------------------------------------------------------------------


@contextlib.contextmanager
def bubblewrap_started(
    *,
    launcher: Sequence[str],
    options: Sequence[str],
    command: Sequence[str],
    extra_fds: Sequence[int] = (),
) -> Iterator[subprocess.Popen[bytes]]:
    """Start bubblewrap; on exit end the sandbox (see `_end_sandbox`), whatever happened.

    The options go through a pipe (`--args FD`): the sandbox's PID 1 is bubblewrap, and its
    command line, readable inside, then shows no host path. `--info-fd` tells the host pid of
    that PID 1."""
    args_read, args_write = os.pipe()
    info_read, info_write = os.pipe()
    try:
        payload = b"".join(arg.encode() + b"\0" for arg in [*options, "--info-fd", str(info_write)])
        if len(payload) > MAX_OPTIONS_BYTES:
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
    except BaseException:
        os.close(info_read)
        raise
    finally:
        os.close(args_read)
        os.close(info_write)
        if args_write >= 0:
            os.close(args_write)
    try:
        yield process
    finally:
        _end_sandbox(process, info_read)


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
        _close_streams(process)


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


# --- unisolated -------------------------------------------------------------------------------


@contextlib.contextmanager
def unisolated_started(
    *,
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    setup: Callable[[], None],
    identity: Mapping[str, object],
) -> Iterator[subprocess.Popen[bytes]]:
    """Start the program directly, in a session of its own; on exit SIGKILL its process group
    and reap it."""
    process = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=setup,
        **identity,  # type: ignore[call-overload]
    )
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        _close_streams(process)


def _close_streams(process: subprocess.Popen[bytes]) -> None:
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
