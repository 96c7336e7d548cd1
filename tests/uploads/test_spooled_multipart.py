"""A spooled multipart body parsed from its mapping gives exactly what Django's parser gives
from the same bytes: the same fields, the same files (names, sizes, SHA-256, bytes) and the same
refusals, whatever the parts hold; a body it cannot take is parsed as sent."""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.core import spooled_multipart
from apps.core.exceptions import DomainError
from apps.submissions.api.parsers import StreamingMultiPartParser

BOUNDARY = "b0undary"
MB = 1024 * 1024


def part(name: str, data: bytes, filename: str | None = None, extra: str = "") -> bytes:
    disposition = f'form-data; name="{name}"'
    if filename is not None:
        disposition += f'; filename="{filename}"'
    head = f"Content-Disposition: {disposition}\r\n{extra}"
    if filename is not None:
        head += "Content-Type: text/x-python\r\n"
    return f"--{BOUNDARY}\r\n{head}\r\n".encode() + data + b"\r\n"


def body_of(*parts: bytes) -> bytes:
    return b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()


def spool_of(body: bytes) -> tempfile.SpooledTemporaryFile[bytes]:
    spool: tempfile.SpooledTemporaryFile[bytes] = tempfile.SpooledTemporaryFile(MB)  # noqa: SIM115 - the caller closes it
    spool.write(body)
    spool.rollover()
    spool.seek(0)
    return spool


def parse(body: bytes, *, spooled: bool) -> dict[str, Any]:
    """What the upload parser makes of `body`: from a rolled-over spool (the web server's) or
    from a plain stream (Django's parser on the bytes as sent)."""
    stream: Any = spool_of(body) if spooled else io.BytesIO(body)
    meta = {
        "wsgi.input": stream,
        "CONTENT_TYPE": f"multipart/form-data; boundary={BOUNDARY}",
        "CONTENT_LENGTH": str(len(body)),
    }
    context = {"request": SimpleNamespace(META=meta)}
    media_type = meta["CONTENT_TYPE"]
    try:
        result = StreamingMultiPartParser().parse(stream, media_type, context)
    except DomainError as exc:
        return {"error": exc.code}
    except Exception as exc:
        return {"error": type(exc).__name__}
    finally:
        stream.close()
    files = []
    for _, upload in result.files.lists():
        for incoming in upload:
            content = Path(incoming.temporary_file_path()).read_bytes()
            files.append((incoming.raw_name, incoming.size, incoming.sha256, content))
            assert hashlib.sha256(content).hexdigest() == incoming.sha256
            incoming.close()
    return {"fields": sorted(result.data.lists()), "files": files}


def same(body: bytes) -> dict[str, Any]:
    fast, plain = parse(body, spooled=True), parse(body, spooled=False)
    assert fast == plain
    return fast


def test_files_and_fields_come_out_as_from_djangos_parser() -> None:
    big = os.urandom(3 * MB)
    got = same(
        body_of(
            part("note", b"hello"),
            part("files", big, "main.py"),
            part("files", b"", "empty.py"),
            part("files", b"x = 1\r\n\r\n", "config.yaml"),
        )
    )
    assert [f[:2] for f in got["files"]] == [
        ("main.py", 3 * MB),
        ("empty.py", 0),
        ("config.yaml", 9),
    ]
    assert got["fields"] == [("note", ["hello"])]


def test_file_bytes_that_look_like_a_marker_or_a_boundary_are_kept() -> None:
    fake = b"\x00yoyaku-part-" + b"0" * 32 + b"-0\x00"
    tricky = fake + b"\r\n--b0undar\r\n\r\n-b0undary" + os.urandom(MB)
    got = same(body_of(part("files", tricky, "a.py"), part("files", fake, "b.py")))
    assert [f[3] for f in got["files"]] == [tricky, fake]
    # A boundary inside a file's bytes ends the part there, for both parsers alike.
    same(body_of(part("files", tricky + b"\r\n--b0undaryX" + tricky, "a.py")))


def test_a_transfer_encoded_part_is_parsed_as_sent() -> None:
    encoded = part("files", b"eCA9IDEK", "a.py", "Content-Transfer-Encoding: base64\r\n")
    got = same(body_of(encoded, part("files", os.urandom(2 * MB), "b.py")))
    assert got["files"][0][3] == b"x = 1\n"


def test_a_file_over_the_limit_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    with override_settings(MAX_UPLOAD_FILE_SIZE=MB, FILE_UPLOAD_TEMP_DIR=str(tmp_path)):
        got = same(body_of(part("files", os.urandom(MB + 1), "a.py")))
        assert got == {"error": "file_too_large"}
        exactly = same(body_of(part("files", os.urandom(MB), "a.py")))
        assert exactly["files"][0][1] == MB
    assert list(tmp_path.iterdir()) == []


def test_a_bad_name_is_refused_as_before() -> None:
    assert same(body_of(part("files", os.urandom(2 * MB), "../evil.py")))["error"]


def test_a_body_cut_off_or_with_large_fields_goes_through_djangos_parser() -> None:
    cut = part("files", os.urandom(2 * MB), "a.py")
    same(cut)  # no closing boundary: the file part is kept as sent
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=MB):
        assert same(body_of(part("note", b"n" * 3 * MB)))["error"]


def test_only_an_unread_spool_of_the_declared_length_is_mapped() -> None:
    body = body_of(part("files", os.urandom(2 * MB), "a.py"))
    spool = spool_of(body)
    meta = {
        "wsgi.input": spool,
        "CONTENT_TYPE": f"multipart/form-data; boundary={BOUNDARY}",
        "CONTENT_LENGTH": str(len(body)),
    }
    mapped = spooled_multipart.spooled_parts(meta)
    assert mapped is not None
    mapped.close()
    assert spooled_multipart.spooled_parts({**meta, "CONTENT_LENGTH": "5"}) is None
    spool.read(1)
    assert spooled_multipart.spooled_parts(meta) is None
    spool.close()


_PARTS = st.lists(
    st.tuples(
        st.sampled_from(["files", "note", ""]),
        st.binary(max_size=64),
        st.sampled_from([None, "a.py", "b.yaml", "", "x\r\n.py"]),
    ),
    max_size=6,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=_PARTS, pad=st.binary(min_size=1, max_size=16), closed=st.booleans())
def test_any_body_comes_out_as_from_djangos_parser(
    parts: list[tuple[str, bytes, str | None]], pad: bytes, closed: bool
) -> None:
    pieces = [part(name, data, filename) for name, data, filename in parts]
    pieces.append(part("files", pad * (MB // len(pad) + 1), "big.py"))
    body = body_of(*pieces) if closed else b"".join(pieces)
    same(body)
