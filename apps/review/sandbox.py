"""The default grader's sandbox: scratch folder, safe unpacking, and the limited child process.

Everything here is mechanism; `apps.review.grader.SubprocessGrader` decides what a run means.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from django.conf import settings
from django.core.files.storage import default_storage

from apps.review.sandbox_supervisor import reap_group

METRICS_FILE = "metrics.json"
MAX_METRICS_SIZE = 1024 * 1024
# The sandbox's process budget (RLIMIT_NPROC, threads included). The kernel exempts root from
# it, which is why a root worker's program runs with an unprivileged real uid (see
# `sandbox_supervisor.apply_limits`).
MAX_PROCESSES = 64
MAX_OPEN_FILES = 256
# Under a root worker each worker process runs its programs with its own unprivileged real uid
# (no passwd entry needed), so concurrent gradings do not share one process budget.
SANDBOX_UID_BASE = 60000
SANDBOX_UID_SPAN = 5000


def sandbox_uid() -> int:
    """The real uid this worker process gives its programs when it runs as root."""
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


CHUNK = 1024 * 1024


class SandboxError(Exception):
    """The submission's files cannot be prepared safely; the attempt fails with this reason."""


# --- Scratch folder -----------------------------------------------------------------------------


def _safe_member_path(root: Path, name: str) -> Path:
    """`root / name` for a relative archive member name that stays inside `root`."""
    pure = PurePosixPath(name.replace("\\", "/"))
    if not name or pure.is_absolute() or ".." in pure.parts or "\x00" in name:
        raise SandboxError(f"Unsafe archive member {name!r}.")
    parts = [part for part in pure.parts if part not in ("", ".")]
    if not parts:
        raise SandboxError(f"Unsafe archive member {name!r}.")
    target = root.joinpath(*parts)
    if not target.resolve().is_relative_to(root.resolve()):
        raise SandboxError(f"Unsafe archive member {name!r}.")
    return target


class _Budget:
    """Bytes written into the scratch folder, against GRADING_MAX_UNPACKED_SIZE."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def copy(self, source: IO[bytes], target: Path) -> None:
        if target.exists() or target.is_symlink():
            raise SandboxError(f"Archive member {target.name!r} would overwrite a file.")
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("xb") as out:
            while chunk := source.read(CHUNK):
                self.used += len(chunk)
                if self.used > self.limit:
                    raise SandboxError(
                        f"The unpacked files exceed GRADING_MAX_UNPACKED_SIZE ({self.limit} bytes)."
                    )
                out.write(chunk)


def _unpack_zip(archive: Path, root: Path, budget: _Budget) -> None:
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                kind = stat.S_IFMT(info.external_attr >> 16)
                if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
                    raise SandboxError(f"Archive member {info.filename!r} is not a plain file.")
                target = _safe_member_path(root, info.filename)
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                with zf.open(info) as source:
                    budget.copy(source, target)
    except (zipfile.BadZipFile, OSError, RuntimeError, ValueError) as exc:
        raise SandboxError(f"Cannot unpack {archive.name}: {exc}") from exc


def _unpack_tar(archive: Path, root: Path, budget: _Budget) -> None:
    try:
        with tarfile.open(archive, mode="r:gz") as tf:
            for member in tf:
                target = _safe_member_path(root, member.name)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                if not member.isfile():
                    raise SandboxError(f"Archive member {member.name!r} is not a plain file.")
                source = tf.extractfile(member)
                if source is None:
                    raise SandboxError(f"Archive member {member.name!r} cannot be read.")
                with source:
                    budget.copy(source, target)
    except (tarfile.TarError, OSError, EOFError, ValueError) as exc:
        raise SandboxError(f"Cannot unpack {archive.name}: {exc}") from exc


def scratch_prepare(files: Iterable[tuple[str, str]], root: Path) -> None:
    """Copy `(filename, storage name)` files from storage into `root`; unpack archives there.

    Archive members must be plain files and folders with relative paths inside `root`; no
    links, devices or `..`; nothing overwrites a file; everything written counts against
    GRADING_MAX_UNPACKED_SIZE. Raises SandboxError.
    """
    budget = _Budget(int(settings.GRADING_MAX_UNPACKED_SIZE))
    archives: list[Path] = []
    for filename, storage_name in files:
        target = _safe_member_path(root, filename)
        if target.parent != root:
            raise SandboxError(f"Unsafe file name {filename!r}.")
        with default_storage.open(storage_name, "rb") as source:
            budget.copy(source, target)
        lower = filename.lower()
        if lower.endswith((".zip", ".tar.gz")):
            archives.append(target)
    for archive in archives:
        if archive.name.lower().endswith(".zip"):
            _unpack_zip(archive, root, budget)
        else:
            _unpack_tar(archive, root, budget)


# --- The child process --------------------------------------------------------------------------

_SAFE_ENV_PREFIXES = ("LC_",)
_SAFE_ENV_NAMES = ("LANG", "LANGUAGE", "TZ", "PYTHONIOENCODING", "PYTHONHASHSEED")
# The child's PATH is fixed, never the worker's: the worker's usually starts with the
# platform's virtualenv, which would name the project's folder and put its packages first.
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"


def sandbox_env(scratch: Path) -> dict[str, str]:
    """The child's whole environment: an allow-list, never the worker's secrets.

    Nothing else passes — no DATABASE_URL, SECRET_KEY, REDIS_URL, AWS_*, tokens, nor
    PYTHONPATH / PYTHONSTARTUP (which could load code from the platform's folders), and
    PATH is a fixed system path rather than the worker's.
    """
    env = {
        name: value
        for name, value in os.environ.items()
        if name in _SAFE_ENV_NAMES or name.startswith(_SAFE_ENV_PREFIXES)
    }
    env["PATH"] = SANDBOX_PATH
    env.setdefault("LANG", "C.UTF-8")
    env["HOME"] = str(scratch)
    env["TMPDIR"] = str(scratch)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


SUPERVISOR = Path(__file__).resolve().parent / "sandbox_supervisor.py"


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int
    memory_bytes: int
    file_bytes: int
    processes: int
    drop_to_uid: int | None

    def spec(self) -> str:
        """The supervisor's `<limits>` argument: `key=value` pairs, commas between."""
        values = {
            "cpu_seconds": self.cpu_seconds,
            "memory_bytes": self.memory_bytes,
            "file_bytes": self.file_bytes,
            "processes": self.processes,
            "open_files": MAX_OPEN_FILES,
            "drop_to_uid": self.drop_to_uid,
            "worker_pid": os.getpid(),
        }
        return ",".join(f"{k}={'' if v is None else v}" for k, v in values.items())


_PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> None:
    """Linux: orphans of the child re-parent to this worker instead of init, so the worker can
    reap them at once (a zombie still counts against the sandbox user's process limit)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _kill_group(pgid: int) -> None:
    """SIGKILL the child's whole process group (the child and everything it forked)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class _OutputReader:
    """Reads the child's merged stdout/stderr, keeping only the first `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        room = self.limit - len(self.kept)
        if room > 0:
            self.kept += data[:room]
        self.dropped += max(0, len(data) - max(room, 0))

    def text(self) -> str:
        text = self.kept.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
        if self.dropped:
            text += f"\n[output truncated: {self.dropped} more bytes not kept]\n"
        return text


@dataclass
class ProcessOutcome:
    exit_code: int | None
    timed_out: bool
    logs: str
    wall_seconds: float
    # Set when the program's fate is unknown because its launcher failed (the program and its
    # group were killed): the attempt fails with this reason.
    error: str = ""


def run_sandboxed(
    argv: list[str], *, cwd: Path, limits: Limits, timeout: float, max_output: int
) -> ProcessOutcome:
    """Run `argv` in its own session with `limits`, a scrubbed env and a wall-clock timeout.

    `argv` runs under the sandbox supervisor (see `sandbox_supervisor`), which kills the whole
    group if this worker dies. The group is also killed when the timeout passes AND when the
    child exits, so nothing it forked outlives the attempt. Output is drained continuously (a
    chatty child never blocks) but only `max_output` bytes are kept.
    """
    import selectors

    _become_subreaper()
    started = time.monotonic()
    supervised = [sys.executable, "-I", "-S", str(SUPERVISOR), limits.spec(), *argv]
    process = subprocess.Popen(  # noqa: S603 - argv is built by us, no shell
        supervised,
        cwd=cwd,
        env=sandbox_env(cwd),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        close_fds=True,
    )
    assert process.stdout is not None  # noqa: S101 - PIPE above
    reader = _OutputReader(max_output)
    deadline = started + timeout
    timed_out = False
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        open_pipe = True
        while open_pipe:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for _key, _ in selector.select(timeout=min(remaining, 0.5)):
                data = os.read(process.stdout.fileno(), 65536)
                if not data:
                    open_pipe = False
                    break
                reader.feed(data)
            if open_pipe and process.poll() is not None:
                # The child exited but something it forked keeps the pipe open: stop here.
                break
    _kill_group(process.pid)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
        process.kill()
        process.wait()
    reap_group(process.pid)
    if not timed_out and process.returncode is not None:
        # Drain what is left in the pipe without blocking (the group is dead now).
        os.set_blocking(process.stdout.fileno(), False)
        with contextlib.suppress(BlockingIOError, OSError):
            while data := os.read(process.stdout.fileno(), 65536):
                reader.feed(data)
    process.stdout.close()
    return ProcessOutcome(
        exit_code=process.returncode,
        timed_out=timed_out,
        logs=reader.text(),
        wall_seconds=time.monotonic() - started,
    )


def describe_exit(code: int) -> str:
    if code >= 0:
        return f"exit code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    hints = {
        "SIGXCPU": " (CPU time limit reached)",
        "SIGXFSZ": " (file size limit reached)",
        "SIGKILL": " (killed)",
        "SIGSEGV": " (crashed, possibly out of memory)",
    }
    return f"killed by {name}{hints.get(name, '')}"


def read_metrics(root: Path) -> Any:
    """Parse `metrics.json` if it is a regular file (never a link, FIFO or device)."""
    path = root / METRICS_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise SandboxError("metrics.json is not a regular file.")
        raw = handle.read(MAX_METRICS_SIZE + 1)
    if len(raw) > MAX_METRICS_SIZE:
        raise SandboxError("metrics.json is larger than 1 MiB.")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SandboxError(f"metrics.json is not valid JSON: {exc}") from exc


@contextlib.contextmanager
def scratch_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="yoyaku-grade-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
