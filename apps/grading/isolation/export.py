"""A stage's output folder brought out of its sandbox: the runner's tar stream (see
`bubblewrap.RUNNER`) unpacked into a host folder of the worker's.

The stream is written by the stage's runner after every process of the program is killed, but
a program can forge it (same uid), so it is read as hostile: only folders and regular files
are written, under normal relative names, at most `MAX_OUTPUT_MEMBERS` of them and
`max_bytes` in all; links, devices and FIFOs are left out. Nothing written is ever followed:
the host folder holds no link, so a later name cannot lead out of it.

The stream is read as uploads are (`apps.core.archive_readers.tar`): `tarfile` with header
extensions bounded before it reads them. A program that rewrites its runner's script in
memory (`/proc/<runner>/mem`: same uid) makes the runner send any bytes; read by plain
`tarfile`, a chain of GNU long-name headers was a RecursionError in the worker (a platform
fault: a free, refunded submission) and a 64 KiB pax header a gigabyte of the worker's memory.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tarfile
from pathlib import Path
from typing import IO

from apps.core.archive_readers.errors import ArchiveError
from apps.core.archive_readers.tar import tar_stream_members
from apps.core.archives import MAX_MEMBER_DEPTH
from apps.grading.isolation.limits import MAX_METRICS_BYTES

MAX_OUTPUT_MEMBERS = 10000


def output_unpack(stream: IO[bytes], target: Path, *, max_bytes: int) -> str:
    """Unpack the tar stream into the folder `target`; "" on success, else the problem (what
    was written before it stays)."""
    total = 0
    count = 0
    try:
        for archive, member in tar_stream_members(stream):
            count += 1
            if count > MAX_OUTPUT_MEMBERS:
                return f"The output folder holds more than {MAX_OUTPUT_MEMBERS} entries."
            name = posixpath.normpath(member.name)
            if name == ".":
                continue
            if name.startswith(("/", "../")) or name == "..":
                return f"The output folder's archive names {member.name!r}."
            if name.count("/") > MAX_MEMBER_DEPTH:
                return f"The output folder holds a path deeper than {MAX_MEMBER_DEPTH} folders."
            path = target / name
            if member.isdir():
                path.mkdir(mode=0o755, parents=True, exist_ok=True)
            elif member.isreg():
                total += member.size
                if total > max_bytes:
                    return f"The output folder holds more than {max_bytes} bytes."
                _write(archive, member, path)
    except ArchiveError as exc:
        return f"The output folder's archive was refused: {exc}"
    except (tarfile.TarError, OSError) as exc:
        return f"The output folder could not be read: {exc}"
    return ""


def _write(archive: tarfile.TarFile, member: tarfile.TarInfo, path: Path) -> None:
    source = archive.extractfile(member)
    if source is None:
        return
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as out:
        shutil.copyfileobj(source, out)


def exported_report(
    spool: IO[bytes], target: Path, *, max_bytes: int, overflow: bool
) -> tuple[bytes, str]:
    """Split the runner's channel of a stage that hands its output folder back: the report in
    the plain form (`<status>\\n<letter><result bytes>`, for `run._parse_result`), and the
    problem of unpacking the folder into `target` ("" if none)."""
    spool.seek(0)
    status = spool.readline(64)
    line = spool.readline(64)
    kind, rest = line[:1], line[1:].strip()
    payload = b""
    if kind == b"F":
        try:
            size = int(rest.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            return status, "The sandbox's report could not be read."
        payload = spool.read(min(max(size, 0), MAX_METRICS_BYTES + 1))
    report = status + kind + payload
    if overflow:
        return report, f"The output folder holds more than {max_bytes} bytes."
    return report, output_unpack(spool, target, max_bytes=max_bytes)
