"""How a file's bytes leave the client: as `bytes` chunks that the HTTP layer (h11) hands to
the socket as they are, with no copy of its own, adding up to the announced length."""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

import h11

from yoyaku_client.multipart import CHUNK_SIZE, FilePart, MultipartStream


def test_a_multipart_body_is_handed_out_as_bytes_objects_and_adds_up(tmp_path: Path) -> None:
    data = os.urandom(2 * CHUNK_SIZE + 5)
    path = tmp_path / "part.py"
    path.write_bytes(data)
    fields = [("entrypoint", "main.py")]
    stream = MultipartStream("b0undary", fields, [FilePart(path, "p.py")], None)
    chunks = list(stream)
    assert all(type(chunk) is bytes for chunk in chunks)
    body = b"".join(chunks)
    assert len(body) == stream.length
    assert data in body


def test_h11_sends_a_bytes_chunk_as_the_same_object() -> None:
    # What the chunks' type buys: the object given is the object sent (no copy), where a
    # view of a buffer is joined into a new `bytes` first.
    connection = h11.Connection(h11.CLIENT)
    head = h11.Request(method="POST", target="/", headers=[("Host", "x"), ("Content-Length", "12")])
    connection.send(head)
    chunk = os.urandom(6)
    assert connection.send(h11.Data(data=chunk)) is chunk
    view = memoryview(bytearray(os.urandom(6)))
    sent = connection.send(h11.Data(data=cast(bytes, view)))  # what httpx passes through
    assert sent is not view
    assert bytes(sent) == bytes(view)
