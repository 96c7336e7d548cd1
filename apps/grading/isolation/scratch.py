"""The host folder a grading's files are prepared in before the sandbox starts."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from apps.grading.isolation.limits import sandbox_host_uid
from apps.grading.isolation.run import NONE


@contextlib.contextmanager
def input_folder() -> Iterator[Path]:
    """A new private folder (mode 0700, random name) removed with everything in it."""
    path = Path(tempfile.mkdtemp(prefix="yoyaku-grade-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def input_folder_hand_over(path: Path, *, isolation: str) -> None:
    """Make the prepared folder usable by the sandbox's host uid, and by nobody else.

    Files become readable (0644, 0755 when executable) and folders traversable (0755) inside
    the folder; the folder itself stays 0700 and, under a root worker, is given to the sandbox
    uid, which is the only one besides root that can reach it. Bubblewrap mounts it read-only;
    unisolated (`none`) the program works in it, so everything in it becomes the sandbox uid's.
    """
    uid = sandbox_host_uid()
    for folder, dirs, files in os.walk(path):
        for name in dirs:
            os.chmod(os.path.join(folder, name), 0o755)  # noqa: S103
        for name in files:
            file = os.path.join(folder, name)
            mode = os.lstat(file).st_mode
            executable = bool(mode & stat.S_IXUSR)
            # Readable inside the 0700 folder that only the sandbox uid can enter.
            os.chmod(file, 0o755 if executable else 0o644)
            if uid is not None and isolation == NONE:
                os.chown(file, uid, uid)
        if uid is not None and isolation == NONE:
            os.chown(folder, uid, uid)
    os.chmod(path, 0o700)
    if uid is not None:
        os.chown(path, uid, uid)
