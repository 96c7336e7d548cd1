"""The archive readers header by header: what `tarfile` (Python 3.11) would have read into
memory, recursed on or parsed in quadratic time is refused before it is read, and what it
reads normally still reads; the zip walk finds the end record `zipfile` uses."""

from __future__ import annotations

import io
import struct
import tarfile
import time
import zipfile
import zlib
from pathlib import Path

import pytest

from apps.core.archive_readers import tar as tar_reader
from apps.core.archive_readers.tar import MAX_HEADER_FIELD, tar_members
from apps.core.archive_readers.zip import zip_directory_count
from apps.core.archives import ArchiveError, check_archive
from tests.factories.archives import (
    gzip_pieces,
    lying_zip,
    pax_header,
    pax_record,
    pax_tar,
    raw_tar_gz,
    tar_header,
)


def _check(tmp_path: Path, content: bytes, kind: str = "tar.gz", members: int = 100) -> None:
    path = tmp_path / f"a.{kind}"
    path.write_bytes(content)
    check_archive(path, kind, max_members=members, max_unpacked=10**9)


def _refused(tmp_path: Path, content: bytes, kind: str = "tar.gz") -> ArchiveError:
    with pytest.raises(ArchiveError) as caught:
        _check(tmp_path, content, kind)
    return caught.value


def test_a_thousand_long_name_headers_in_a_row_are_unsafe_not_a_recursion_error(
    tmp_path: Path,
) -> None:
    """`tarfile` follows each extension header with a recursive call."""
    name = b"n" * 100
    chain = [tar_header(b"././@LongLink", len(name), b"L") + name.ljust(512, b"\0")] * 1000
    refused = _refused(tmp_path, raw_tar_gz([*chain, tar_header(b"x.py", 0)]))

    assert refused.kind == "unsafe"
    assert "extension headers in a row" in str(refused)


def test_pax_records_built_for_the_quadratic_parse_are_refused(tmp_path: Path) -> None:
    """`2 2 2 … x=`: Python 3.11's pax regex matches at every second byte with a keyword
    running to the end, holding about 1 GB of keywords for these 64 KiB."""
    records = b"2 " * ((MAX_HEADER_FIELD - 4) // 2) + b"x=\n"
    refused = _refused(tmp_path, raw_tar_gz([*pax_header(records), tar_header(b"x.py", 0)]))

    assert refused.kind == "invalid"
    assert "malformed pax header" in str(refused)


def test_pax_header_of_digits_is_refused(tmp_path: Path) -> None:
    """Digits without framing: the `hdrcharset` search of Python 3.11 is quadratic on them."""
    records = b"1" * (MAX_HEADER_FIELD - 1) + b"\n"
    refused = _refused(tmp_path, raw_tar_gz([*pax_header(records), tar_header(b"x.py", 0)]))

    assert refused.kind == "invalid"


@pytest.mark.parametrize("kind", [b"x", b"g", b"K", b"L"])
def test_header_field_over_the_cap_is_unsafe_before_it_is_read(tmp_path: Path, kind: bytes) -> None:
    declared = 256 * 1024 * 1024
    content = gzip_pieces([(tar_header(b"h", declared, kind), 1), (bytes(1 << 20), 256)])

    refused = _refused(tmp_path, content)

    assert refused.kind == "unsafe"
    assert f"header field of {declared} bytes" in str(refused)


def test_too_many_global_pax_records_are_unsafe(tmp_path: Path) -> None:
    records = b"".join(pax_record(f"key{index}", "v") for index in range(100))
    refused = _refused(tmp_path, raw_tar_gz([*pax_header(records, b"g"), tar_header(b"a", 0)]))

    assert refused.kind == "unsafe"
    assert "global pax records" in str(refused)


def test_pax_records_and_header_bytes_are_bounded_over_the_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tar_reader, "MAX_PAX_RECORDS", 25)
    content = pax_tar({f"f{i}.py": b"1" for i in range(30)})

    refused = _refused(tmp_path, content)

    assert "more than 25 pax records" in str(refused)
    monkeypatch.setattr(tar_reader, "MAX_PAX_RECORDS", 10**6)
    monkeypatch.setattr(tar_reader, "MAX_HEADER_BYTES", 500)
    assert "extension headers hold more than 500 bytes" in str(_refused(tmp_path, content))


@pytest.mark.parametrize(
    "blocks",
    [
        [tar_header(b"s", 0, b"S")],
        [*pax_header(pax_record("GNU.sparse.major", "1")), tar_header(b"s", 0)],
    ],
    ids=["old-gnu-sparse", "pax-sparse"],
)
def test_sparse_members_are_unsafe(tmp_path: Path, blocks: list[bytes]) -> None:
    refused = _refused(tmp_path, raw_tar_gz(blocks))

    assert refused.kind == "unsafe"
    assert "sparse" in str(refused)


def test_negative_pax_size_is_invalid(tmp_path: Path) -> None:
    refused = _refused(
        tmp_path, raw_tar_gz([*pax_header(pax_record("size", "-512")), tar_header(b"x.py", 0)])
    )

    assert refused.kind == "invalid"


def test_legitimate_gnu_and_pax_archives_read_as_tarfile_reads_them(tmp_path: Path) -> None:
    names = ["d/" + "long" * 80 + ".py", "é" * 150 + ".txt", "plain.py"]
    for fmt in (tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz", format=fmt) as archive:
            for name in names:
                info = tarfile.TarInfo(name)
                info.size = len(name)
                archive.addfile(info, io.BytesIO(name.encode()))
        path = tmp_path / "legit.tar.gz"
        path.write_bytes(buffer.getvalue())

        ours = [(info.name, info.size) for _, info in tar_members(path)]
        with tarfile.open(path) as reference:
            theirs = [(info.name, info.size) for info in reference]

        assert ours == theirs == [(name, len(name)) for name in names]
    _check(tmp_path, pax_tar({"a.py": b"1"}, pax={"hdrcharset": "BINARY", "mtime": "1.5"}))


def test_gzip_header_with_a_huge_file_name_is_parsed_in_c(tmp_path: Path) -> None:
    """`tarfile` and `gzip` read a gzip header's file name one byte per Python call."""
    body = raw_tar_gz([tar_header(b"a.py", 0)])
    header = b"\x1f\x8b\x08\x08" + body[4:10] + b"n" * (40 * 1024 * 1024) + b"\0"
    start = time.monotonic()

    _check(tmp_path, header + body[10:])

    assert time.monotonic() - start < 5.0


def test_multi_member_gzip_reads_every_member(tmp_path: Path) -> None:
    raw = b"".join([tar_header(b"a.py", 0), tar_header(b"b.py", 0), bytes(1024)])
    content = zlib.compress(raw[:512], 6, wbits=31) + zlib.compress(raw[512:], 6, wbits=31)
    path = tmp_path / "two.tar.gz"
    path.write_bytes(content)

    assert [info.name for _, info in tar_members(path)] == ["a.py", "b.py"]


def _with_zip64_end(content: bytes, entries: int) -> bytes:
    """`content` with a zip64 end record and locator inserted before its end record."""
    end_at = len(content) - 22
    size, offset = struct.unpack_from("<LL", content, end_at + 12)
    record = struct.pack(
        "<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, size, offset
    )
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, end_at, 1)
    return content[:end_at] + record + locator + content[end_at:]


def test_zip64_end_record_is_the_one_counted_as_zipfile_does(tmp_path: Path) -> None:
    """`zipfile` prefers a zip64 end record whenever its locator is there."""
    honest = _with_zip64_end(lying_zip(40, declared=1), entries=40)
    path = tmp_path / "z64.zip"
    path.write_bytes(honest)

    assert zip_directory_count(path, max_members=100) == 40
    assert len(zipfile.ZipFile(path).infolist()) == 40
    refused = _refused(tmp_path, _with_zip64_end(lying_zip(40, declared=40), entries=1), "zip")
    assert "declares 1 members but its central directory holds 40" in str(refused)


def test_zip_with_a_comment_and_prepended_bytes_is_walked_like_zipfile(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for index in range(7):
            archive.writestr(f"f{index}.py", b"1")
        archive.comment = b"a comment after the end record " * 100
    path = tmp_path / "c.zip"
    path.write_bytes(b"#!/bin/sh\n" * 100 + buffer.getvalue())

    assert zip_directory_count(path, max_members=10) == len(zipfile.ZipFile(path).infolist())
