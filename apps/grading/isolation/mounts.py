"""What a sandbox holds of the host's files: the stage's own files, handed to bubblewrap as open
descriptors or one read-only folder, and the stage's folders at paths of its own, checked here
(see `bubblewrap` for the whole file system)."""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from apps.grading.isolation.bubblewrap import InputFile

# Up to this many files are handed to bubblewrap as open descriptors and written into the
# sandbox by bubblewrap itself; more are copied by the runner from a read-only mount.
MAX_FILES_AS_DESCRIPTORS = 64


@dataclass(frozen=True)
class InputFiles:
    """A prepared input folder: its files as open descriptors (None when there are more than
    `MAX_FILES_AS_DESCRIPTORS`: the folder is then mounted), their folders, total bytes."""

    files: list[InputFile] | None
    folders: list[str]
    size: int

    @property
    def fds(self) -> tuple[int, ...]:
        return tuple(f.fd for f in self.files or ())


@contextlib.contextmanager
def input_files(root: Path) -> Iterator[InputFiles]:
    """The files of a prepared input folder. Nothing in it is a link (the worker wrote it);
    descriptors are closed on exit."""
    found: list[tuple[Path, bool]] = []
    folders: list[str] = []
    size = 0
    for folder, dirs, names in os.walk(root):
        base = Path(folder)
        folders += [str((base / d).relative_to(root)) for d in sorted(dirs)]
        for name in names:
            status = os.lstat(base / name)
            size += status.st_size
            found.append((base / name, bool(status.st_mode & stat.S_IXUSR)))
    if len(found) > MAX_FILES_AS_DESCRIPTORS:
        yield InputFiles(None, [], size)
        return
    opened: list[InputFile] = []
    try:
        for path, executable in found:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            opened.append(InputFile(fd, str(path.relative_to(root)), executable))
        yield InputFiles(opened, folders, size)
    finally:
        for file in opened:
            os.close(file.fd)


# Folders of the system or of the sandbox's own making: a stage cannot put a folder there.
RESERVED = (
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/dev",
    "/sandbox", "/tmp", "/input",  # noqa: S108 - paths inside the sandbox
)  # fmt: skip
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _overlap(a: str, b: str) -> bool:
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def stage_folders_problem(
    *,
    mounts: Mapping[str, Path],
    output: str,
    environment: Mapping[str, str],
    readonly_paths: Sequence[str] = (),
) -> str | None:
    """Why a stage's folders or environment cannot be given to a sandbox, or None.

    Every inside path is absolute and normal, none is `/`, a system folder, one of the
    sandbox's own or the operator's read-only folders, and none holds another; every mounted
    host folder exists. Variable names are shell names without NUL in their values."""
    points = [*mounts, *([output] if output else [])]
    for point in points:
        if (
            not point.startswith("/")
            or point.startswith("//")
            or posixpath.normpath(point) != point
        ):
            return f"{point!r} is not an absolute, normal folder path inside the sandbox."
        if point == "/" or any(_overlap(point, taken) for taken in (*RESERVED, *readonly_paths)):
            return f"{point!r} is a system folder or one the sandbox makes itself."
    for index, point in enumerate(points):
        if any(_overlap(point, other) for other in points[index + 1 :]):
            return f"{point!r} overlaps another folder of the stage."
    for point, host in mounts.items():
        if not (host.is_absolute() and host.is_dir()):
            return f"The folder for {point!r} ({host}) is not an absolute path to a folder."
    for name, value in environment.items():
        if not _NAME.fullmatch(name) or "\0" in value:
            return f"The environment variable {name!r} is not a valid name and value."
    return None
