"""Reading a program's result file (`metrics.json`) from the host side (unisolated runs)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from apps.grading.isolation.limits import MAX_METRICS_BYTES


def read_metrics_file(path: Path) -> tuple[bytes | None, str]:
    """A regular file's bytes (never following a link, never blocking on a FIFO), capped."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, ""
    except OSError:
        return None, f"{path.name} is not a regular file."
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None, f"{path.name} is not a regular file."
        raw = handle.read(MAX_METRICS_BYTES + 1)
    if len(raw) > MAX_METRICS_BYTES:
        return None, f"{path.name} is larger than {MAX_METRICS_BYTES} bytes."
    return raw, ""
