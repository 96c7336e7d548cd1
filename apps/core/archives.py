"""The one set of archive rules, used by the upload check and by the grader's unpacking.

An archive is safe when it holds at most `max_members` members, each a plain file or folder
at a relative path inside the archive, unpacking to at most `max_unpacked` bytes, and no header
field (GNU long name or long link, pax record) is larger than `MAX_HEADER_FIELD`. The tar
checks run on a streaming pass over the raw headers *before* `tarfile` parses anything:
`tarfile` reads a long-name or pax header's whole declared size into memory, so a 1 MB
`.tar.gz` declaring a 1 GiB name would otherwise cost 1 GiB. A zip is judged by its end record
and central directory (nothing is decompressed to check it). Memory stays bounded by the
header cap whatever the archive declares.

Plain Python, no Django: limits come in as arguments.
"""

from __future__ import annotations

import gzip
import re
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Protocol

from apps.core.validation import contains_nul, name_display_problem

MAX_HEADER_FIELD = 64 * 1024
BLOCK = 512
CHUNK = 1024 * 1024
UNSAFE = "unsafe"
INVALID = "invalid"
_DRIVE = re.compile(r"^[A-Za-z]:")
# Header entries that describe the next member rather than being one.
_META_TYPES = {b"L", b"K", b"x", b"g", b"X"}
_PLAIN_TYPES = {b"0", b"\0", b"7", b"5"}


class _Readable(Protocol):
    def read(self, size: int = ..., /) -> bytes: ...


class ArchiveError(Exception):
    """`kind` is `unsafe` (refused by a rule) or `invalid` (cannot be read)."""

    def __init__(self, message: str, *, kind: str, member: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.member = member


def archive_kind(name: str) -> str | None:
    lowered = name.lower()
    if lowered.endswith(".zip"):
        return "zip"
    if lowered.endswith((".tar.gz", ".tgz")):
        return "tar.gz"
    return None


def member_problem(name: str) -> str | None:
    """Why a member name is not a relative path inside the archive, or None."""
    if not name:
        return "an empty member name"
    if contains_nul(name):
        return "a member name with NUL"
    if name.startswith(("/", "\\")) or _DRIVE.match(name):
        return f"an absolute path ({name})"
    parts = [part for part in re.split(r"[/\\]+", name) if part not in ("", ".")]
    if ".." in parts:
        return f"a path that leaves the archive ({name})"
    if not parts:
        return f"a member with no name ({name})"
    shown = name_display_problem(name, path=True)
    return None if shown is None else f"a member name with {shown} ({name!r})"


def member_target(root: Path, name: str) -> Path:
    """Where a member goes under `root`; ArchiveError for a name `member_problem` refuses."""
    problem = member_problem(name)
    if problem is not None:
        raise ArchiveError(f"The archive contains {problem}.", kind=UNSAFE, member=name)
    parts = [p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("", ".")]
    return root.joinpath(*parts)


# --- tar: the streaming header pass -----------------------------------------------------------


def _octal(field: bytes) -> int:
    """A numeric header field: octal text, or GNU base-256 when the high bit is set."""
    if field[:1] and field[0] & 0x80:
        value = int.from_bytes(field[1:], "big")
        return -value if field[0] == 0xFF else value
    text = field.split(b"\0", 1)[0].strip(b" \0")
    return int(text, 8) if text else 0


def _checksum_ok(block: bytes) -> bool:
    try:
        stored = _octal(block[148:156])
    except ValueError:
        return False
    unsigned = sum(block[:148]) + 256 + sum(block[156:])
    return stored == unsigned


def _read_exact(stream: _Readable, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise ArchiveError("The archive is truncated.", kind=INVALID)
    return data


def _skip(stream: _Readable, size: int) -> None:
    while size > 0:
        data = stream.read(min(size, CHUNK))
        if not data:
            raise ArchiveError("The archive is truncated.", kind=INVALID)
        size -= len(data)


def _pax_size(data: bytes) -> int | None:
    """The `size` record of a pax header, if any; refuse GNU sparse members."""
    size = None
    position = 0
    while position < len(data):
        space = data.find(b" ", position)
        if space < 0:
            break
        try:
            length = int(data[position:space])
        except ValueError:
            raise ArchiveError("The archive has a malformed pax header.", kind=INVALID) from None
        if length <= 0:
            raise ArchiveError("The archive has a malformed pax header.", kind=INVALID)
        record = data[space + 1 : position + length].rstrip(b"\n")
        key, _, value = record.partition(b"=")
        if key.startswith(b"GNU.sparse"):
            raise ArchiveError("The archive contains a sparse file.", kind=UNSAFE)
        if key == b"size":
            try:
                size = int(value)
            except ValueError:
                raise ArchiveError("The archive has a malformed pax size.", kind=INVALID) from None
        position += length
    return size


def tar_prescan(path: Path, *, max_members: int, max_unpacked: int) -> None:
    """Walk a `.tar.gz`'s headers in 512-byte blocks, holding at most one header field in
    memory, and refuse it before `tarfile` reads it. Stops where `tarfile` stops (the first
    zero or invalid block)."""
    members = 0
    unpacked = 0
    global_size: int | None = None
    next_size: int | None = None
    try:
        with gzip.open(path, "rb") as stream:
            while True:
                block = stream.read(BLOCK)
                if len(block) < BLOCK or block == bytes(BLOCK) or not _checksum_ok(block):
                    return
                kind = block[156:157]
                size = _octal(block[124:136])
                if size < 0:
                    raise ArchiveError("The archive has a negative size.", kind=INVALID)
                padded = -(-size // BLOCK) * BLOCK
                if kind in _META_TYPES:
                    if size > MAX_HEADER_FIELD:
                        raise ArchiveError(
                            f"The archive has a header field of {size} bytes (at most "
                            f"{MAX_HEADER_FIELD} are accepted).",
                            kind=UNSAFE,
                        )
                    data = _read_exact(stream, padded)[:size]
                    if kind in (b"x", b"X"):
                        next_size = _pax_size(data)
                    elif kind == b"g":
                        global_size = _pax_size(data)
                    continue
                members += 1
                if members > max_members:
                    raise ArchiveError(
                        f"The archive has more than {max_members} members.", kind=UNSAFE
                    )
                real = next_size if next_size is not None else global_size
                if real is not None:
                    size = real
                    padded = -(-size // BLOCK) * BLOCK
                next_size = None
                if kind == b"S":
                    raise ArchiveError("The archive contains a sparse file.", kind=UNSAFE)
                if kind in (b"0", b"\0", b"7"):
                    unpacked += size
                    if unpacked > max_unpacked:
                        raise ArchiveError(
                            f"The archive holds more than {max_unpacked} bytes once unpacked.",
                            kind=UNSAFE,
                        )
                _skip(stream, padded)
    except (OSError, EOFError, zlib.error, ValueError) as exc:
        if isinstance(exc, ArchiveError):
            raise
        raise ArchiveError(
            f"The archive is not a readable tar.gz ({type(exc).__name__}).", kind=INVALID
        ) from exc


def _tar_members(path: Path) -> Iterator[tuple[tarfile.TarFile, tarfile.TarInfo]]:
    with tarfile.open(path, mode="r:gz") as archive:
        for info in archive:
            yield archive, info


def _tar_member_problem(info: tarfile.TarInfo) -> str | None:
    if info.issym() or info.islnk():
        return f"a link ({info.name})"
    if not (info.isfile() or info.isdir()):
        return f"a device, FIFO or other special file ({info.name})"
    return member_problem(info.name)


# --- zip --------------------------------------------------------------------------------------

_EOCD = struct.Struct("<4s4H2LH")
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")


def zip_precheck(path: Path, *, max_members: int) -> None:
    """Read the end record (and its zip64 form) and refuse too many members or an oversized
    central directory before `zipfile` builds one object per entry."""
    with path.open("rb") as handle:
        handle.seek(0, 2)
        end = handle.tell()
        tail_size = min(end, _EOCD.size + 65535)
        handle.seek(end - tail_size)
        tail = handle.read(tail_size)
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) - at < _EOCD.size:
            raise ArchiveError("The archive is not a readable zip (no end record).", kind=INVALID)
        fields = _EOCD.unpack(tail[at : at + _EOCD.size])
        entries, directory_size = fields[4], fields[5]
        if entries == 0xFFFF or directory_size == 0xFFFFFFFF:
            locator_at = at - _ZIP64_LOCATOR.size
            if locator_at < 0:
                raise ArchiveError("The archive has a broken zip64 end record.", kind=INVALID)
            signature, _, offset, _ = _ZIP64_LOCATOR.unpack(
                tail[locator_at : locator_at + _ZIP64_LOCATOR.size]
            )
            if signature != b"PK\x06\x07" or offset > end - _ZIP64_EOCD.size:
                raise ArchiveError("The archive has a broken zip64 end record.", kind=INVALID)
            handle.seek(offset)
            record = _ZIP64_EOCD.unpack(handle.read(_ZIP64_EOCD.size))
            if record[0] != b"PK\x06\x06":
                raise ArchiveError("The archive has a broken zip64 end record.", kind=INVALID)
            entries, directory_size = record[6], record[7]
    if entries > max_members:
        raise ArchiveError(f"The archive has more than {max_members} members.", kind=UNSAFE)
    if directory_size > max(max_members, 1) * 1024:
        raise ArchiveError("The archive's central directory is too large.", kind=UNSAFE)


def _zip_member_problem(info: zipfile.ZipInfo) -> str | None:
    # Unix type bits, when the archiver recorded them (0 = not recorded: a plain entry).
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
        return f"a link or special file ({info.filename})"
    return member_problem(info.filename)


# --- The two uses -----------------------------------------------------------------------------

_READ_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    tarfile.TarError,
    EOFError,
    zlib.error,
    OSError,
    ValueError,
    NotImplementedError,
    UnicodeDecodeError,
)


def check_archive(path: Path, kind: str, *, max_members: int, max_unpacked: int) -> None:
    """Refuse an archive that breaks a rule (ArchiveError `unsafe`) or cannot be read
    (`invalid`). Nothing is written; a tar.gz is decompressed once, a zip not at all."""
    try:
        if kind == "zip":
            zip_precheck(path, max_members=max_members)
            declared = 0
            with zipfile.ZipFile(path) as archive:
                for info in archive.infolist():
                    problem = _zip_member_problem(info)
                    if problem is not None:
                        raise ArchiveError(
                            f"The archive contains {problem}.", kind=UNSAFE, member=info.filename
                        )
                    declared += info.file_size
                    if declared > max_unpacked:
                        raise ArchiveError(
                            f"The archive holds more than {max_unpacked} bytes once unpacked.",
                            kind=UNSAFE,
                        )
            return
        tar_prescan(path, max_members=max_members, max_unpacked=max_unpacked)
        for _, member in _tar_members(path):
            problem = _tar_member_problem(member)
            if problem is not None:
                raise ArchiveError(
                    f"The archive contains {problem}.", kind=UNSAFE, member=member.name
                )
    except ArchiveError:
        raise
    except _READ_ERRORS as exc:
        raise ArchiveError(
            f"The archive is not a readable {kind} archive ({type(exc).__name__}).", kind=INVALID
        ) from exc


class Budget:
    """Bytes written while preparing a folder, against a limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def copy(self, source: IO[bytes], target: Path) -> None:
        """Stream `source` into a new file `target` (never overwriting, never following a
        link), counting every byte."""
        if target.exists() or target.is_symlink():
            raise ArchiveError(
                f"Archive member {target.name!r} would overwrite a file.", kind=UNSAFE
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("xb") as out:
            while chunk := source.read(CHUNK):
                self.used += len(chunk)
                if self.used > self.limit:
                    raise ArchiveError(
                        f"The unpacked files exceed {self.limit} bytes.", kind=UNSAFE
                    )
                out.write(chunk)


def unpack_archive(path: Path, root: Path, *, budget: Budget, max_members: int) -> None:
    """Check `path` with the same rules as an upload, then unpack it under `root`, writing
    plain files and folders only, every byte counted by `budget`."""
    kind = archive_kind(path.name)
    if kind is None:
        raise ArchiveError(f"{path.name} is not an archive.", kind=INVALID)
    check_archive(path, kind, max_members=max_members, max_unpacked=budget.limit)
    try:
        if kind == "zip":
            with zipfile.ZipFile(path) as archive:
                for info in archive.infolist():
                    target = member_target(root, info.filename)
                    if info.is_dir():
                        target.mkdir(parents=True, exist_ok=True)
                        continue
                    with archive.open(info) as source:
                        budget.copy(source, target)
            return
        for tar, member in _tar_members(path):
            target = member_target(root, member.name)
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            data = tar.extractfile(member)
            if data is None:
                raise ArchiveError(f"Archive member {member.name!r} cannot be read.", kind=INVALID)
            with data:
                budget.copy(data, target)
    except ArchiveError:
        raise
    except _READ_ERRORS as exc:
        raise ArchiveError(
            f"Cannot unpack {path.name}: {type(exc).__name__}: {exc}", kind=INVALID
        ) from exc
