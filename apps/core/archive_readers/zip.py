"""A zip's members counted from its central directory, found and walked as `zipfile` does.

`zipfile` finds the end record (the last 22 bytes, else the last signature in the final
64 KiB + 22), prefers a zip64 end record whenever its locator is present, and then reads the
central directory by its *size*, one entry after another, ignoring the end record's count.
`zip_directory_count` does the same without building a `ZipInfo` per entry, stops at member
`max_members + 1`, and refuses an end record whose count disagrees with the directory.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from apps.core.archive_readers.errors import INVALID, UNSAFE, ArchiveError

_END = struct.Struct("<4s4H2LH")
_END_SIGNATURE = b"PK\x05\x06"
_LOCATOR = struct.Struct("<4sLQL")
_LOCATOR_SIGNATURE = b"PK\x06\x07"
_END64 = struct.Struct("<4sQ2H2L4Q")
_END64_SIGNATURE = b"PK\x06\x06"
_ENTRY = struct.Struct("<4s4B4HL2L5H2L")
_ENTRY_SIGNATURE = b"PK\x01\x02"
# Bytes of central directory accepted per allowed member (names, extra fields, comments).
DIRECTORY_BYTES_PER_MEMBER = 1024


@dataclass(frozen=True)
class EndRecord:
    entries_here: int
    entries_total: int
    directory_size: int
    directory_offset: int
    location: int
    zip64: bool


def _end_record64(handle: BinaryIO, end_at: int, record: EndRecord) -> EndRecord:
    """`zipfile._EndRecData64`: the zip64 record just before the locator, if both are there."""
    locator_at = end_at - _LOCATOR.size
    if locator_at < 0:
        return record
    handle.seek(locator_at)
    data = handle.read(_LOCATOR.size)
    if len(data) != _LOCATOR.size:
        return record
    signature, disk, _, disks = _LOCATOR.unpack(data)
    if signature != _LOCATOR_SIGNATURE:
        return record
    if disk != 0 or disks > 1:
        raise ArchiveError("The archive spans several disks.", kind=INVALID)
    if locator_at - _END64.size < 0:
        return record
    handle.seek(locator_at - _END64.size)
    data = handle.read(_END64.size)
    if len(data) != _END64.size:
        return record
    fields = _END64.unpack(data)
    if fields[0] != _END64_SIGNATURE:
        return record
    return EndRecord(fields[6], fields[7], fields[8], fields[9], record.location, zip64=True)


def end_record(handle: BinaryIO) -> EndRecord:
    """`zipfile._EndRecData`: the end record `zipfile` will use, or ArchiveError `invalid`."""
    handle.seek(0, 2)
    size = handle.tell()
    if size < _END.size:
        raise ArchiveError("The archive is not a readable zip (no end record).", kind=INVALID)
    handle.seek(size - _END.size)
    data = handle.read(_END.size)
    if data[:4] == _END_SIGNATURE and data[-2:] == b"\0\0":
        at = size - _END.size
    else:
        start = max(size - (1 << 16) - _END.size, 0)
        handle.seek(start)
        tail = handle.read()
        found = tail.rfind(_END_SIGNATURE)
        data = tail[found : found + _END.size]
        if found < 0 or len(data) != _END.size:
            raise ArchiveError("The archive is not a readable zip (no end record).", kind=INVALID)
        at = start + found
    fields = _END.unpack(data)
    record = EndRecord(fields[3], fields[4], fields[5], fields[6], at, zip64=False)
    return _end_record64(handle, at, record)


def zip_directory_count(path: Path, *, max_members: int) -> int:
    """How many entries `zipfile` will read from the central directory. Refuses (`unsafe`)
    more than `max_members`, a directory larger than `DIRECTORY_BYTES_PER_MEMBER` per allowed
    member, and an end record whose counts differ from the directory's; `invalid` for what
    `zipfile` cannot read. Reads at most the capped directory, once."""
    with path.open("rb") as handle:
        record = end_record(handle)
        if record.directory_size > max(max_members, 1) * DIRECTORY_BYTES_PER_MEMBER:
            raise ArchiveError("The archive's central directory is too large.", kind=UNSAFE)
        prepended = record.location - record.directory_size - record.directory_offset
        if record.zip64:
            prepended -= _END64.size + _LOCATOR.size
        start = record.directory_offset + prepended
        if start < 0:
            raise ArchiveError("The archive has a bad central directory offset.", kind=INVALID)
        handle.seek(start)
        directory = handle.read(record.directory_size)
    count = 0
    position = 0
    while position < record.directory_size:
        entry = directory[position : position + _ENTRY.size]
        if len(entry) != _ENTRY.size:
            raise ArchiveError("The archive's central directory is truncated.", kind=INVALID)
        fields = _ENTRY.unpack(entry)
        if fields[0] != _ENTRY_SIGNATURE:
            raise ArchiveError("The archive's central directory is damaged.", kind=INVALID)
        count += 1
        if count > max_members:
            raise ArchiveError(f"The archive has more than {max_members} members.", kind=UNSAFE)
        position += _ENTRY.size + fields[12] + fields[13] + fields[14]
    if count != record.entries_total or count != record.entries_here:
        raise ArchiveError(
            f"The archive's end record declares {record.entries_total} members but its "
            f"central directory holds {count}.",
            kind=UNSAFE,
        )
    return count
