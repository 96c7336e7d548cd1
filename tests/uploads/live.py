"""Resumable uploads over HTTP against a web process on loopback (gunicorn): the requests of
the draft protocol, and a web process killed with SIGKILL mid-upload."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import threading
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from apps.submissions.models import ResumableUpload
from tests.processes import Start, http_request, start_gunicorn, wait_for

MiB = 1024 * 1024
V8 = {"Upload-Draft-Interop-Version": "8"}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def create_upload(port: int, token: str, length: int) -> str:
    status, headers, _ = http_request(
        port,
        "POST",
        "/api/uploads/",
        b"",
        **{"Upload-Complete": "?0", "Upload-Length": str(length), **V8, **bearer(token)},
    )
    assert status == HTTPStatus.CREATED
    return urlsplit(headers["Location"]).path


def append(port: int, token: str, path: str, offset: int, body: bytes, *, complete: bool) -> Any:
    return http_request(
        port,
        "PATCH",
        path,
        body,
        **{
            "Content-Type": "application/partial-upload",
            "Upload-Offset": str(offset),
            "Upload-Complete": "?1" if complete else "?0",
            **V8,
            **bearer(token),
        },
    )


def upload_offset(port: int, token: str, path: str) -> int:
    status, headers, _ = http_request(port, "HEAD", path, None, **V8, **bearer(token))
    assert status == HTTPStatus.NO_CONTENT
    return int(headers["Upload-Offset"])


def upload_killed_midway(
    port: int, web: subprocess.Popen[bytes], token: str, data: bytes, *, past: int
) -> tuple[str, list[Any]]:
    """Upload `data` (4 MiB in a first append, the rest in a second one on a thread) and kill
    the web process with SIGKILL once the server has saved more than `past` bytes. Returns the
    upload's path and what the second append got (an OSError: its connection died)."""
    path = create_upload(port, token, len(data))
    assert append(port, token, path, 0, data[: 4 * MiB], complete=False)[0] == 204
    results: list[Any] = []

    def send_rest() -> None:
        try:
            results.append(append(port, token, path, 4 * MiB, data[4 * MiB :], complete=True))
        except OSError as exc:
            results.append(exc)

    sender = threading.Thread(target=send_rest, daemon=True)
    sender.start()
    wait_for(lambda: ResumableUpload.objects.get().offset > past, 60, f"a checkpoint past {past}")
    os.killpg(web.pid, signal.SIGKILL)
    web.wait(10)
    sender.join(30)
    return path, results


def resumed_on_a_new_web_process(
    start: Start, env: dict[str, str], token: str, path: str, data: bytes, *, saved: int
) -> ResumableUpload:
    """Start a new web process (with `env`), check it reports the `saved` offset, and send the
    rest of `data` until the dead writer's claim lapses; the completed upload, sha256 checked."""
    port, _ = start_gunicorn(start, "web-again", 1, **env)
    offset = upload_offset(port, token, path)
    assert offset == saved

    def resumed() -> bool:
        status = append(port, token, path, offset, data[offset:], complete=True)[0]
        assert status in (HTTPStatus.OK, HTTPStatus.CONFLICT)  # 409 while the dead claim lasts
        return bool(status == HTTPStatus.OK)

    wait_for(resumed, 30, "the dead writer's claim to lapse")
    upload = ResumableUpload.objects.get()
    assert upload.complete
    assert upload.sha256 == hashlib.sha256(data).hexdigest()
    return upload
