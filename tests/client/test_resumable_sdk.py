"""The SDK's resumable uploader against a live server's `/api/uploads/` (the IETF draft,
interop version 8): two uploaders racing on one upload, each answered 409 while the other
appends and carrying on from the server's offset; the stored bytes are the file's."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.client.conftest import token_for
from yoyaku_client import Client
from yoyaku_client.transport import RetryPolicy

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MIB = 1024 * 1024


@pytest.fixture
def small_files(settings: Any) -> int:
    settings.MAX_UPLOAD_FILE_SIZE = MIB
    return MIB


def _content(size: int) -> bytes:
    line = b"# " + b"0123456789abcdef" * 63 + b"\n"
    return (line * (size // len(line) + 1))[:size]


def test_two_uploaders_racing_on_one_upload_store_the_files_bytes(
    live_server: Any, researcher: Any, tmp_path: Path, small_files: int
) -> None:
    data = _content(6 * MIB + 12345)
    path = tmp_path / "data.py"
    path.write_bytes(data)
    token = token_for(researcher)
    with Client(live_server.url, token) as client:
        upload_id = client.create_upload(length=len(data)).upload_id
    barrier = threading.Barrier(2)
    results: list[Any] = []
    errors: list[BaseException] = []

    def upload() -> None:
        with Client(live_server.url, token, retry=RetryPolicy(max_attempts=50)) as client:
            try:
                barrier.wait(timeout=30)
                results.append(client.upload_resumable(path, upload_id=upload_id, chunk=MIB))
            except BaseException as exc:  # reported below
                errors.append(exc)

    threads = [threading.Thread(target=upload) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)

    assert errors == []
    assert [r.complete for r in results] == [True, True]
    assert {r.upload_id for r in results} == {upload_id}
    with Client(live_server.url, token) as client:
        status = client.upload_status(upload_id)
    assert (status.offset, status.complete) == (len(data), True)
    stored = httpx.get(
        f"{live_server.url}/api/uploads/{upload_id}/",
        headers={"Authorization": f"Bearer {token}"},
    ).json()
    assert (stored["offset"], stored["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
