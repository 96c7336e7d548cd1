"""What a sandbox holds of the host's files: the stage's own files, handed to bubblewrap as open
descriptors or one read-only folder (see `bubblewrap` for the whole file system)."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
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
