"""The compiled runner (`runner.c`): the sandbox's first process and a root worker's uid switch
as one static program, instead of `/bin/sh` running `prlimit` and `head` inside and `setpriv`
outside: one program started instead of four, each of which loads shared libraries.

It is built from its source with the host's C compiler the first time a process needs it and
kept per uid in `<tmp>/yoyaku-runner-<uid>/` (a folder only that uid can write, checked before
every use), named by a digest of the source and the build flags. A host without a compiler
(or without a static C library) gets None, and the sandbox runs the shell runner
(`bubblewrap.RUNNER`) with the same limits and report, a few milliseconds slower.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from apps.grading.isolation.limits import MAX_METRICS_BYTES, sandbox_host_uid

SOURCE = Path(__file__).with_name("runner.c")
# Where the binary is bound, read-only, inside the sandbox.
INSIDE_PATH = "/run/runner"
# The runner's exit status when the files could not be copied in (scratch too small).
COPY_FAILED = 125
INPUT_DIR = "/input"
SETPRIV = "/usr/bin/setpriv"
_DEFINES = (
    f"-DMAX_METRICS_BYTES={MAX_METRICS_BYTES}",
    f"-DCOPY_FAILED={COPY_FAILED}",
    f'-DINPUT_DIR="{INPUT_DIR}"',
)
_FLAGS = ("-O2", "-static", "-s", "-Wall", "-Wextra", "-Werror", *_DEFINES)
_COMPILER_PATH = "/usr/bin:/bin:/usr/local/bin"


def _owned_private(path: Path, is_kind: Callable[[int], bool]) -> bool:
    """`path` (not followed if a link) is of that kind, this uid's, and nobody else can write it."""
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return False
    return (
        is_kind(status.st_mode)
        and status.st_uid == os.geteuid()
        and not status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def _private_folder(path: Path) -> bool:
    """`path` is a real folder of this uid that nobody else can write."""
    return _owned_private(path, stat.S_ISDIR)


def _trusted_file(path: Path) -> bool:
    return _owned_private(path, stat.S_ISREG)


def _folder() -> Path | None:
    """The cache folder, created 0755 (the sandbox uid of a root worker must reach the binary);
    None when the name is taken by something this uid does not own alone."""
    folder = Path(tempfile.gettempdir()) / f"yoyaku-runner-{os.geteuid()}"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o755)
    return folder if _private_folder(folder) else None


def _build(compiler: str, target: Path) -> bool:
    partial = target.with_name(f".build-{os.getpid()}-{target.name}")
    try:
        subprocess.run(  # noqa: S603 - fixed argv, no shell
            [compiler, *_FLAGS, "-o", str(partial), str(SOURCE)],
            check=True,
            capture_output=True,
            timeout=120,
            env={"PATH": _COMPILER_PATH},
        )
        partial.chmod(0o755)
        os.replace(partial, target)
    except (OSError, subprocess.SubprocessError):
        with contextlib.suppress(OSError):
            partial.unlink()
        return False
    return True


@functools.lru_cache(maxsize=1)
def _compiler_and_name() -> tuple[str, str] | None:
    compiler = shutil.which("cc", path=_COMPILER_PATH)
    if compiler is None or not SOURCE.is_file():
        return None
    digest = hashlib.sha256(SOURCE.read_bytes() + "\0".join(_FLAGS).encode()).hexdigest()
    return compiler, f"runner-{digest[:20]}"


# Binaries this process saw start, and the ones it could not build or start.
_started: set[str] = set()
_failed: set[str] = set()
_lock = threading.Lock()


def runner_binary() -> str | None:
    """The host path of the compiled runner, built on first use; None when this host cannot
    build or start it (the shell runner is used). The folder and the file are checked before
    every use (a few microseconds); one removed since (a cleaner of the temporary folder) is
    built again."""
    found = _compiler_and_name()
    if found is None:
        return None
    compiler, name = found
    folder = Path(tempfile.gettempdir()) / f"yoyaku-runner-{os.geteuid()}"
    target = str(folder / name)
    if target in _failed:
        return None
    if target in _started and _private_folder(folder) and _trusted_file(Path(target)):
        return target
    with _lock:
        if _folder() != folder:
            return None
        built = _trusted_file(Path(target)) or _build(compiler, Path(target))
        if not (built and _trusted_file(Path(target)) and _starts(Path(target))):
            _failed.add(target)
            return None
        _started.add(target)
        return target


def forget() -> None:
    """Forget what this process learnt about the compiled runner (for tests)."""
    _compiler_and_name.cache_clear()
    _started.clear()
    _failed.clear()


def _starts(binary: Path) -> bool:
    """The binary runs here (a `noexec` temporary folder would refuse it, on the host and
    inside the sandbox alike): without arguments it says so and exits 126."""
    try:
        done = subprocess.run(  # noqa: S603 - our own binary, no shell
            [str(binary)], capture_output=True, timeout=30, env={}
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 126 and b"bad arguments" in done.stderr


def launcher_argv(binary: str, uid: int, program: str) -> list[str]:
    """A root worker's start of `program` (bubblewrap) as `uid` (see `runner.c`, `launch`)."""
    return [binary, "launch", str(uid), "--", program]


def launcher(bwrap: str, binary: str | None) -> list[str]:
    """How bubblewrap is started. No preexec_fn and no `user=`: either makes subprocess fork
    the whole worker instead of vfork (about 14 ms for a 200 MB worker). A root worker
    switches uid with the compiled runner's `launch` or, without it, util-linux's setpriv;
    the rlimits are set inside (see `bubblewrap.runner_argv`)."""
    host_uid = sandbox_host_uid()
    if host_uid is None:
        return [bwrap]
    if binary is not None:
        return launcher_argv(binary, host_uid, bwrap)
    return [
        SETPRIV,
        f"--reuid={host_uid}",
        f"--regid={host_uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--",
        bwrap,
    ]


def runner_command(
    *, result: str, export: str, rlimits: list[str], program: list[str]
) -> list[str]:
    """The sandbox's command when the compiled runner is bound at `INSIDE_PATH`."""
    return [INSIDE_PATH, "run", result, export, *rlimits, "--", *program]
