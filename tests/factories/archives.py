"""Hostile and legitimate archives built byte by byte, for the archive rules' tests.

Each builder returns the archive's bytes. The tar builders write raw ustar headers, so a test
can choose what `tarfile` accepts and an older scanner did not (a header whose checksum is
the *signed* byte sum), and the large ones are single-member gzip files assembled from
repeated, fully flushed deflate pieces: a 1 GiB declared name costs about 1 MB and well under
a second to build.
"""

from __future__ import annotations

import struct
import tarfile
import zlib
from collections.abc import Iterable

BLOCK = 512
MIB = 1024 * 1024


def tar_header(name: bytes, size: int, kind: bytes = b"0", *, signed: bool = False) -> bytes:
    """A ustar header block. `signed`: the owner name holds bytes above 0x7F and the checksum
    is the signed byte sum, which `tarfile` accepts and an unsigned-only check does not."""
    block = bytearray(BLOCK)
    block[0 : len(name)] = name
    block[100:108] = b"0000644\0"
    block[108:116] = b"0001750\0"
    block[116:124] = b"0001750\0"
    block[124:136] = f"{size:011o}\0".encode()
    block[136:148] = b"14712345670\0"
    block[156:157] = kind
    block[257:263] = b"ustar\0"
    block[263:265] = b"00"
    block[265:273] = b"\xff\xfe\xfd\xfcuser" if signed else b"user\0\0\0\0"
    block[148:156] = b" " * 8
    total = sum(byte - 256 if signed and byte > 0x7F else byte for byte in block)
    block[148:156] = f"{total:06o}\0 ".encode()
    return bytes(block)


def _padding(size: int) -> bytes:
    return bytes(-size % BLOCK)


def gzip_pieces(pieces: Iterable[tuple[bytes, int]]) -> bytes:
    """A single-member gzip file of each `(data, times)` piece repeated `times` times. Each
    piece is compressed once and its fully flushed deflate output repeated (a full flush
    leaves no back-reference, so identical input compresses identically)."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    out = [b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"]
    crc = 0
    length = 0
    for data, times in pieces:
        if times == 0:
            continue
        deflate.compress(b"")
        first = deflate.compress(data) + deflate.flush(zlib.Z_FULL_FLUSH)
        out.append(first)
        if times > 1:
            again = deflate.compress(data) + deflate.flush(zlib.Z_FULL_FLUSH)
            out.append(again * (times - 1))
        for _ in range(times):
            crc = zlib.crc32(data, crc)
        length += len(data) * times
    out.append(deflate.flush(zlib.Z_FINISH))
    out.append(struct.pack("<II", crc, length & 0xFFFFFFFF))
    return b"".join(out)


def signed_long_name_bomb(declared: int = 1 << 30) -> bytes:
    """A `.tar.gz` of about 1 MB: one member behind a signed-checksum header, then a GNU long
    name header declaring `declared` bytes (which follow, as zeros), then a member."""
    zeros = -(-declared // MIB)
    return gzip_pieces(
        [
            (tar_header(b"a.py", 0, signed=True), 1),
            (tar_header(b"././@LongLink", declared, b"L"), 1),
            (bytes(MIB), zeros),
            (tar_header(b"x.py", 0), 1),
            (bytes(2 * BLOCK), 1),
        ]
    )


def members_behind_odd_header(count: int) -> bytes:
    """A `.tar.gz` of `count` empty members with distinct names, the first behind a
    signed-checksum header."""
    template = bytearray(tar_header(b"m0000000.py", 0))
    base = sum(template) - sum(template[148:156]) + 8 * ord(" ") - sum(template[1:8])
    headers = [tar_header(b"odd.py", 0, signed=True)]
    for index in range(1, count):
        digits = f"{index:07d}".encode()
        template[1:8] = digits
        template[148:156] = f"{base + sum(digits):06o}\0 ".encode()
        headers.append(bytes(template))
    headers.append(bytes(2 * BLOCK))
    return zlib.compress(b"".join(headers), 1, wbits=31)


def signed_checksum_tar(files: dict[str, bytes]) -> bytes:
    """A legitimate `.tar.gz` whose every header carries a signed checksum."""
    parts = []
    for name, content in files.items():
        parts += [tar_header(name.encode(), len(content), signed=True), content]
        parts.append(_padding(len(content)))
    parts.append(bytes(2 * BLOCK))
    return zlib.compress(b"".join(parts), 6, wbits=31)


def pax_tar(files: dict[str, bytes], *, pax: dict[str, str] | None = None) -> bytes:
    """A legitimate `.tar.gz` in pax format (each member with a pax header: long UTF-8 names,
    `pax` records added to each)."""
    import io

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.pax_headers = {"comment": "built by the tests", **(pax or {})}
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def raw_tar_gz(blocks: Iterable[bytes]) -> bytes:
    """Headers and data exactly as given, then the end-of-archive blocks, gzipped."""
    return zlib.compress(b"".join([*blocks, bytes(2 * BLOCK)]), 6, wbits=31)


def pax_record(key: str, value: str) -> bytes:
    """One pax record, `"%d %s=%s\\n"` with the length counting itself."""
    line = f" {key}={value}\n".encode()
    length = len(line) + 1
    while len(str(length)) + len(line) != length:
        length += 1
    return str(length).encode() + line


def pax_header(records: bytes, kind: bytes = b"x") -> list[bytes]:
    """A pax header (`x`, or `g` for global) holding `records` as given, padded."""
    return [tar_header(b"PaxHeader/x", len(records), kind), records, _padding(len(records))]


def lying_zip(count: int, *, declared: int = 1) -> bytes:
    """A zip of `count` empty stored members whose end record says it holds `declared`."""
    local = struct.Struct("<4s5H3L2H")
    central = struct.Struct("<4s6H3L5H2L")
    body: list[bytes] = []
    directory: list[bytes] = []
    offset = 0
    for index in range(count):
        name = f"m{index:07d}.py".encode()
        header = local.pack(b"PK\x03\x04", 20, 0, 0, 0, 0x21, 0, 0, 0, len(name), 0) + name
        body.append(header)
        directory.append(
            central.pack(
                b"PK\x01\x02", 20, 20, 0, 0, 0, 0x21, 0, 0, 0, len(name), 0, 0, 0, 0, 0, offset
            )
            + name
        )
        offset += len(header)
    listing = b"".join(directory)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, declared, declared, len(listing), offset, 0)
    return b"".join(body) + listing + end
