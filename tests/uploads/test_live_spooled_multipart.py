"""Multipart uploads through the web process (gunicorn, its event-loop worker), whose spooled
bodies are parsed from their mapping: files racing into one draft from several threads are
stored byte for byte with their SHA-256, a wrong X-Content-SHA256 stores nothing, a file over
the limit is refused, and no temporary file is left behind."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from django.core.files.storage import default_storage

from apps.submissions.models import SubmissionFile
from tests.factories.tokens import make_token
from tests.factories.users import make_user
from tests.processes import Start, http_request, start_gunicorn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MiB = 1024 * 1024
BOUNDARY = "live-b0undary"


def multipart(field: str, name: str, data: bytes) -> bytes:
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{field}"; filename="{name}"\r\n'
        "Content-Type: text/x-python\r\n\r\n"
    )
    return head.encode() + data + f"\r\n--{BOUNDARY}--\r\n".encode()


def post(port: int, token: str, path: str, body: bytes, **headers: str) -> tuple[int, Any]:
    status, _, answer = http_request(
        port,
        "POST",
        path,
        body,
        **{
            "Authorization": f"Bearer {token}",
            "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
            **headers,
        },
    )
    return status, json.loads(answer)


def test_racing_uploads_are_stored_whole_and_wrong_checksums_store_nothing(
    start_process: Start, tmp_path: Path
) -> None:
    token = make_token(make_user(username="alice"))
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    port, _ = start_gunicorn(
        start_process,
        "web",
        2,
        FILE_UPLOAD_TEMP_DIR=str(incoming),
        MAX_UPLOAD_FILE_SIZE=str(4 * MiB),
    )
    first = os.urandom(3 * MiB + 7)
    status, created = post(port, token, "/api/submissions/", multipart("files", "a.py", first))
    assert status == HTTPStatus.CREATED, created
    path = f"/api/submissions/{created['submission_id']}/files/"

    files = {f"part{i}.py": os.urandom(2 * MiB + i) for i in range(6)}
    answers: dict[str, tuple[int, Any]] = {}

    def send(name: str, data: bytes, checksum: str) -> None:
        body = multipart("file", name, data)
        answers[name] = post(port, token, path, body, **{"X-Content-SHA256": checksum})

    threads = [
        threading.Thread(
            target=send,
            args=(name, data, hashlib.sha256(data if i % 2 == 0 else data[1:]).hexdigest()),
        )
        for i, (name, data) in enumerate(files.items())
    ]
    threads.append(
        threading.Thread(
            target=send,
            args=("big.py", os.urandom(4 * MiB + 1), "0" * 64),
        )
    )
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    for i, name in enumerate(files):
        status, answer = answers[name]
        if i % 2 == 0:
            assert status == HTTPStatus.CREATED, answer
        else:
            assert (status, answer["code"]) == (HTTPStatus.BAD_REQUEST, "checksum_mismatch")
    assert answers["big.py"][1]["code"] == "file_too_large"

    stored = {f.filename: f for f in SubmissionFile.objects.all()}
    kept = {name: data for i, (name, data) in enumerate(files.items()) if i % 2 == 0}
    assert set(stored) == {"a.py", *kept}
    for name, data in {"a.py": first, **kept}.items():
        row = stored[name]
        assert row.size == len(data)
        assert row.sha256 == hashlib.sha256(data).hexdigest()
        with default_storage.open(row.storage_name, "rb") as handle:
            assert handle.read() == data
    assert list(incoming.iterdir()) == []
