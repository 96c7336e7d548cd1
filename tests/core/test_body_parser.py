"""The HTTP/1 parser that hands a body's reads on as they arrived sees every request exactly as
gunicorn's own parser does, however the bytes are split into reads: the same heads, the same
body bytes, the same completions and the same bytes left after a message."""

from __future__ import annotations

from typing import Any

from gunicorn.asgi import protocol as gunicorn_protocol
from gunicorn.asgi.parser import PythonProtocol
from hypothesis import given, settings
from hypothesis import strategies as st

from config.server.protocol import BodyPassingParser


def run(parser_class: type[Any], reads: list[bytes]) -> dict[str, Any]:
    seen: dict[str, Any] = {"heads": 0, "body": [], "complete": 0}

    def on_headers_complete() -> bool:
        seen["heads"] += 1
        return False

    def on_body(chunk: bytes) -> None:
        assert type(chunk) is bytes
        seen["body"].append(chunk)

    def on_complete() -> None:
        seen["complete"] += 1

    parser = parser_class(
        on_headers_complete=on_headers_complete,
        on_body=on_body,
        on_message_complete=on_complete,
    )
    try:
        for read in reads:
            parser.feed(read)
    except Exception as exc:  # the refusal is part of what is compared
        seen["error"] = type(exc).__name__
    seen["body"] = b"".join(seen["body"])
    seen["left"] = parser.remaining() if parser.is_complete else None
    return seen


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(cut, len(data)) for cut in cuts})
    pieces, start = [], 0
    for point in [*points, len(data)]:
        if point > start:
            pieces.append(data[start:point])
            start = point
    return pieces


REQUESTS = [
    b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world",
    b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\n\r\n",
    b"POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /up HTTP/1.1\r\nContent-Length: 3\r\n\r\n",
]


@settings(max_examples=300, deadline=None)
@given(
    request=st.sampled_from(REQUESTS),
    body=st.binary(max_size=300),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6),
)
def test_the_parser_sees_what_gunicorns_sees(request: bytes, body: bytes, cuts: list[int]) -> None:
    if b"Content-Length: 11\r\n" in request and body:
        head = request.split(b"\r\n\r\n", 1)[0].replace(b"11", str(len(body)).encode())
        request = head + b"\r\n\r\n" + body
    reads = split(request, cuts)
    ours = run(BodyPassingParser, reads)
    assert ours == run(PythonProtocol, reads)


def test_a_body_read_whole_is_handed_on_without_a_copy() -> None:
    received: list[bytes] = []
    parser = BodyPassingParser(on_body=received.append)
    parser.feed(b"POST /up HTTP/1.1\r\nContent-Length: 8\r\n\r\nab")
    read = b"cdefgh"
    parser.feed(read)
    assert received[-1] is read
    assert parser.is_complete


def test_the_server_parses_with_it() -> None:
    assert gunicorn_protocol.PythonProtocol is BodyPassingParser
