"""A `.tar.gz` read by `tarfile` itself, with header extensions bounded before they are read.

`tarfile` reads a GNU long name or link (`L`, `K`) or a pax header (`x`, `g`, `X`) whole into
memory at the size its header declares, then follows the next header recursively; its pax
parser (Python 3.11) is quadratic on crafted records and applies every global record to every
member. `CheckedTarInfo` is handed to `tarfile` as `tarinfo=`, so it sees each header exactly
when and as `tarfile` does (signed or unsigned checksum, GNU and pax extensions), and refuses:

- an extension header declaring more than `MAX_HEADER_FIELD` bytes, before reading it;
- more than `MAX_EXTENSION_RUN` extension headers in a row (each one a recursion in `tarfile`);
- more than `MAX_HEADER_BYTES` of extension headers or `MAX_PAX_RECORDS` pax records in all,
  more than `MAX_GLOBAL_PAX_RECORDS` global ones, and sparse files of every format.

Pax records are parsed strictly (the framing later Pythons enforce). `tar_members` opens the
archive in streaming mode (nothing seeks back) and keeps no list of members, so memory stays
at one header field and one member whatever the archive declares; whatever ends `tarfile`'s
iteration ends it, for the upload check and the unpacking alike.
"""

from __future__ import annotations

import re
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from apps.core.archive_readers.errors import INVALID, UNSAFE, ArchiveError
from apps.core.archive_readers.gzip_stream import GzipStream

MAX_HEADER_FIELD = 64 * 1024
MAX_EXTENSION_RUN = 8
MAX_HEADER_BYTES = 16 * 1024 * 1024
MAX_PAX_RECORDS = 200_000
MAX_GLOBAL_PAX_RECORDS = 64
BLOCK = tarfile.BLOCKSIZE

_EXTENSIONS = (
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
)
_PAX_LENGTH = re.compile(rb"([0-9]{1,20}) ")


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


class CheckedTarFile(tarfile.TarFile):
    """`tarfile.TarFile` carrying the counters its headers are checked against."""

    extension_run = 0
    header_bytes = 0
    pax_records = 0


def _counters(archive: tarfile.TarFile) -> CheckedTarFile:
    if not isinstance(archive, CheckedTarFile):
        raise TypeError("CheckedTarInfo reads only through CheckedTarFile.")
    return archive


class CheckedTarInfo(tarfile.TarInfo):
    """A `TarInfo` whose header extensions are bounded before `tarfile` reads them."""

    def _proc_member(self, owner: tarfile.TarFile) -> tarfile.TarInfo:
        archive = _counters(owner)
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise ArchiveError("The archive contains a sparse file.", kind=UNSAFE)
        if self.type in _EXTENSIONS:
            _extension_admit(archive, self.size)
        else:
            archive.extension_run = 0
        member: tarfile.TarInfo = tarfile.TarInfo._proc_member(self, owner)  # type: ignore[attr-defined]
        return member

    def _proc_pax(self, owner: tarfile.TarFile) -> tarfile.TarInfo:
        """`tarfile`'s own pax handling, with a strict, linear record parser."""
        archive = _counters(owner)
        buf = archive.fileobj.read(_padded(self.size))
        records = _pax_records(
            buf,
            binary_encoding=archive.encoding or "utf-8",
            binary=archive.pax_headers.get("hdrcharset") == "BINARY",
        )
        archive.pax_records += len(records)
        if archive.pax_records > MAX_PAX_RECORDS:
            raise ArchiveError(
                f"The archive has more than {MAX_PAX_RECORDS} pax records.", kind=UNSAFE
            )
        if self.type == tarfile.XGLTYPE:
            archive.pax_headers.update(records)  # type: ignore[attr-defined]
            if len(archive.pax_headers) > MAX_GLOBAL_PAX_RECORDS:
                raise ArchiveError(
                    f"The archive has more than {MAX_GLOBAL_PAX_RECORDS} global pax records.",
                    kind=UNSAFE,
                )
        try:
            following = self.fromtarfile(archive)
        except tarfile.HeaderError as exc:
            raise tarfile.SubsequentHeaderError(str(exc)) from None  # type: ignore[attr-defined]
        if self.type == tarfile.XGLTYPE:
            return following
        headers = {**archive.pax_headers, **records}
        following._apply_pax_info(headers, archive.encoding, archive.errors)  # type: ignore[attr-defined]
        following.offset = self.offset
        if "size" in headers:
            offset = following.offset_data
            if following.isreg() or following.type not in tarfile.SUPPORTED_TYPES:
                offset += _padded(following.size)
            archive.offset = offset
        return following


def _extension_admit(archive: CheckedTarFile, size: int) -> None:
    if size < 0:
        raise ArchiveError("The archive has a negative header size.", kind=INVALID)
    if size > MAX_HEADER_FIELD:
        raise ArchiveError(
            f"The archive has a header field of {size} bytes (at most {MAX_HEADER_FIELD} are "
            "accepted).",
            kind=UNSAFE,
        )
    archive.extension_run += 1
    if archive.extension_run > MAX_EXTENSION_RUN:
        raise ArchiveError(
            f"The archive has more than {MAX_EXTENSION_RUN} extension headers in a row.",
            kind=UNSAFE,
        )
    archive.header_bytes += size
    if archive.header_bytes > MAX_HEADER_BYTES:
        raise ArchiveError(
            f"The archive's extension headers hold more than {MAX_HEADER_BYTES} bytes.",
            kind=UNSAFE,
        )


def _pax_decode(raw: bytes, encoding: str) -> str:
    try:
        return raw.decode(encoding, "strict")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "surrogateescape")


def _pax_records(buf: bytes, *, binary_encoding: str, binary: bool) -> dict[str, str]:
    """`"%d %s=%s\\n"` records, each length exact, up to the first NUL; anything else is an
    invalid header. Refuses GNU sparse records. Name fields use `binary_encoding` when the
    first `hdrcharset` record (or, without one, `binary`) says BINARY, as `tarfile` does."""
    raw: list[tuple[bytes, bytes]] = []
    names_binary, charset_seen = binary, False
    position = 0
    while position < len(buf) and buf[position] != 0:
        match = _PAX_LENGTH.match(buf, position)
        if match is None:
            raise ArchiveError("The archive has a malformed pax header.", kind=INVALID)
        length = int(match.group(1))
        end = position + length - 1
        if length < 5 or end >= len(buf) or buf[end] != 0x0A:
            raise ArchiveError("The archive has a malformed pax header.", kind=INVALID)
        keyword, equals, value = buf[match.end() : end].partition(b"=")
        if not keyword or not equals:
            raise ArchiveError("The archive has a malformed pax header.", kind=INVALID)
        if keyword.startswith(b"GNU.sparse"):
            raise ArchiveError("The archive contains a sparse file.", kind=UNSAFE)
        if keyword == b"hdrcharset" and not charset_seen:
            charset_seen = True
            names_binary = value == b"BINARY"
        raw.append((keyword, value))
        position += length
    names_encoding = binary_encoding if names_binary else "utf-8"
    records: dict[str, str] = {}
    for keyword, value in raw:
        key = _pax_decode(keyword, "utf-8")
        name_field = key in tarfile.PAX_NAME_FIELDS
        records[key] = _pax_decode(value, names_encoding if name_field else "utf-8")
    return records


def tar_members(path: Path) -> Iterator[tuple[tarfile.TarFile, tarfile.TarInfo]]:
    """Every member of a `.tar.gz` as `tarfile` yields it, read forward once; `ArchiveError`
    for a refused header, `tarfile`/`OSError` exceptions for an unreadable one."""
    with path.open("rb") as raw:
        yield from tar_stream_members(GzipStream(raw))  # type: ignore[arg-type]


def tar_stream_members(stream: IO[bytes]) -> Iterator[tuple[tarfile.TarFile, tarfile.TarInfo]]:
    """Every member of an uncompressed tar stream, read forward once, with header extensions
    bounded (`CheckedTarInfo`); `ArchiveError` for a refused header, `tarfile`/`OSError`
    exceptions for an unreadable one."""
    with CheckedTarFile.open(
        fileobj=stream,
        mode="r|",
        tarinfo=CheckedTarInfo,
        encoding="utf-8",
        errors="surrogateescape",
    ) as archive:
        while (info := archive.next()) is not None:
            # Streaming mode still appends every member to `members`; keep none.
            archive.members.clear()  # type: ignore[attr-defined]
            yield archive, info
