"""Resumable uploads against the web process as production runs it (gunicorn on loopback):
an append whose connection closes mid-body, a web process killed with SIGKILL mid-upload and
restarted, and the third-party tus client `tuspy` interrupted and resumed. On SQLite and
PostgreSQL (the database the run points at)."""

from __future__ import annotations

import hashlib
import io
import os
import signal
import socket
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from tusclient import client as tus_client
from tusclient.storage import filestorage
from tusclient.uploader.uploader import Uploader

from apps.submissions.models import ResumableUpload
from apps.submissions.resumable import store
from tests.factories.tokens import make_token
from tests.factories.users import make_user
from tests.processes import Start, start_gunicorn
from tests.uploads.live import (
    MiB,
    append,
    bearer,
    create_upload,
    resumed_on_a_new_web_process,
    upload_killed_midway,
    upload_offset,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _stored_prefix_ok(data: bytes, offset: int) -> bool:
    upload = ResumableUpload.objects.get()
    with store.local_path(upload.storage_key).open("rb") as handle:
        return handle.read(offset) == data[:offset]


def test_append_cut_off_mid_body_keeps_only_stored_bytes_then_resumes(
    start_process: Start,
) -> None:
    token = make_token(make_user(username="alice"))
    port, _ = start_gunicorn(start_process, "web", 1)
    data = os.urandom(12 * MiB)
    path = create_upload(port, token, len(data))
    assert append(port, token, path, 0, data[: 2 * MiB], complete=False)[0] == 204
    sent = 2 * MiB
    with socket.create_connection(("127.0.0.1", port)) as sock:
        head = (
            f"PATCH {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/partial-upload\r\nUpload-Offset: 2097152\r\n"
            f"Upload-Complete: ?0\r\nUpload-Draft-Interop-Version: 8\r\n"
            f"Content-Length: {len(data) - sent}\r\n\r\n"
        )
        sock.sendall(head.encode() + data[sent : sent + 5 * MiB])
        sent += 5 * MiB
    offset = upload_offset(port, token, path)
    assert 2 * MiB <= offset <= sent
    assert _stored_prefix_ok(data, offset)
    status, _, _ = append(port, token, path, offset, data[offset:], complete=True)
    assert status == HTTPStatus.OK
    upload = ResumableUpload.objects.get()
    assert upload.complete
    assert upload.sha256 == hashlib.sha256(data).hexdigest()
    assert store.local_path(upload.storage_key).read_bytes() == data


def test_web_process_killed_mid_upload_then_resumed_with_the_right_sha256(
    start_process: Start,
) -> None:
    token = make_token(make_user(username="alice"))
    env = {"UPLOAD_CHECKPOINT_BYTES": str(MiB), "UPLOAD_WRITE_LEASE_SECONDS": "1"}
    port, web = start_gunicorn(start_process, "web", 1, **env)
    data = os.urandom(64 * MiB)
    # Kill once the server has saved part of the second append (checkpoints every MiB).
    path, results = upload_killed_midway(port, web, token, data, past=6 * MiB)
    assert web.returncode == -signal.SIGKILL
    assert len(results) == 1
    assert isinstance(results[0], OSError)
    saved = ResumableUpload.objects.get()
    assert 6 * MiB < saved.offset < len(data)
    assert not saved.complete
    assert _stored_prefix_ok(data, saved.offset)

    upload = resumed_on_a_new_web_process(start_process, env, token, path, data, saved=saved.offset)
    assert store.local_path(upload.storage_key).read_bytes() == data


class KeptOpen(io.BytesIO):
    """tuspy closes the stream after taking its fingerprint and reads it again later: the
    file's bytes in a stream that its `close()` leaves open (the test closes it)."""

    def close(self) -> None:
        pass

    def really_close(self) -> None:
        super().close()


class Sha256Uploader(Uploader):
    """tuspy's uploader with its checksum extension on sha256 (tuspy's default is sha1)."""

    CHECKSUM_ALGORITHM_PAIR = ("sha256", hashlib.sha256)


def test_tuspy_uploads_stops_and_resumes_with_a_new_client(
    start_process: Start, tmp_path: Path
) -> None:
    token = make_token(make_user(username="alice"))
    port, _ = start_gunicorn(start_process, "web", 1)
    data = os.urandom(5 * MiB + 123)
    source = tmp_path / "predictions.csv"
    source.write_bytes(data)
    url_store = filestorage.FileStorage(str(tmp_path / "tus-urls.json"))

    def uploader(stream: Any) -> Uploader:
        client = tus_client.TusClient(
            f"http://127.0.0.1:{port}/api/uploads/", headers=bearer(token)
        )
        return Sha256Uploader(
            file_stream=stream,
            client=client,
            chunk_size=MiB,
            metadata={"filename": "predictions.csv"},
            store_url=True,
            url_storage=url_store,
            upload_checksum=True,
        )

    stream = KeptOpen(source.read_bytes())
    first = uploader(stream)
    first.upload(stop_at=2 * MiB)
    assert first.offset == 2 * MiB
    url = first.url
    # A new client (as after a restart) finds the upload by the file's fingerprint and asks
    # the server where to resume.
    stream.really_close()
    stream = KeptOpen(source.read_bytes())
    second = uploader(stream)
    assert second.url == url
    assert second.offset == 2 * MiB
    second.upload()
    stream.really_close()
    upload = ResumableUpload.objects.get()
    assert upload.complete
    assert upload.offset == len(data)
    assert upload.sha256 == hashlib.sha256(data).hexdigest()
    assert upload.metadata == {"filename": "predictions.csv"}
    url_store.close()
