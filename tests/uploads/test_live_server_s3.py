"""The web process (gunicorn on loopback) on S3 (moto's server on loopback) killed with
SIGKILL mid-upload: the parts it sent and its fsynced tail hold every saved byte, and a new
web process, which knows nothing but the row and what S3 lists, resumes and completes the
multipart upload with the right sha256 and a whole object."""

from __future__ import annotations

import hashlib
import os
import signal
import threading
from http import HTTPStatus
from typing import Any

import pytest

from apps.submissions.models import ResumableUpload
from apps.submissions.resumable import s3parts
from tests.factories.tokens import make_token
from tests.factories.users import make_user
from tests.processes import Start, start_gunicorn, wait_for
from tests.submissions.test_s3 import CREDENTIALS, s3, s3_endpoint  # noqa: F401 - fixtures
from tests.uploads.test_live_server import MiB, _append, _create, _offset

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PART = 5 * MiB


def test_web_process_killed_mid_upload_on_s3_then_resumed_by_a_new_one(
    start_process: Start,
    s3: Any,  # noqa: F811 - the fixture
    s3_endpoint: str,  # noqa: F811 - the fixture
    settings: Any,
) -> None:
    settings.UPLOAD_S3_PART_SIZE = PART
    token = make_token(make_user(username="alice"))
    env = {
        "UPLOAD_CHECKPOINT_BYTES": str(MiB),
        "UPLOAD_WRITE_LEASE_SECONDS": "1",
        "UPLOAD_S3_PART_SIZE": str(PART),
        "AWS_STORAGE_BUCKET_NAME": s3.bucket,
        "AWS_S3_ENDPOINT_URL": s3_endpoint,
        "AWS_S3_REGION_NAME": "us-east-1",
        "AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS["aws_secret_access_key"],
    }
    port, web = start_gunicorn(start_process, "web", 1, **env)
    data = os.urandom(40 * MiB + 321)
    path = _create(port, token, len(data))
    assert _append(port, token, path, 0, data[: 4 * MiB], complete=False)[0] == 204
    results: list[Any] = []

    def send_rest() -> None:
        try:
            results.append(_append(port, token, path, 4 * MiB, data[4 * MiB :], complete=True))
        except OSError as exc:
            results.append(exc)

    sender = threading.Thread(target=send_rest, daemon=True)
    sender.start()
    wait_for(lambda: ResumableUpload.objects.get().offset > 13 * MiB, 60, "a checkpoint")
    os.killpg(web.pid, signal.SIGKILL)
    web.wait(10)
    sender.join(30)
    assert isinstance(results[0], OSError)
    saved = ResumableUpload.objects.get()
    assert 13 * MiB < saved.offset < len(data)
    key = saved.storage_key
    (pending,) = s3.list_multipart_uploads(Bucket=s3.bucket)["Uploads"]
    listed = s3.list_parts(Bucket=s3.bucket, Key=key, UploadId=pending["UploadId"])["Parts"]
    assert len(listed) >= 2
    assert all(int(part["Size"]) == PART for part in listed)
    # Every saved byte is in a sent part or in a tail file.
    tails = s3parts.tail_files(key)
    assert tails
    first = min(tails)
    assert first <= len(listed) + 1
    held = (first - 1) * PART + tails[first].stat().st_size
    assert held >= saved.offset

    port, _ = start_gunicorn(start_process, "web-again", 1, **env)
    offset = _offset(port, token, path)
    assert offset == saved.offset

    def resumed() -> bool:
        status = _append(port, token, path, offset, data[offset:], complete=True)[0]
        assert status in (HTTPStatus.OK, HTTPStatus.CONFLICT)  # 409 while the dead claim lasts
        return bool(status == HTTPStatus.OK)

    wait_for(resumed, 30, "the dead writer's claim to lapse")
    upload = ResumableUpload.objects.get()
    assert upload.complete
    assert upload.sha256 == hashlib.sha256(data).hexdigest()
    assert s3.list_multipart_uploads(Bucket=s3.bucket).get("Uploads", []) == []
    whole = s3.get_object(Bucket=s3.bucket, Key=key)["Body"].read()
    assert hashlib.sha256(whole).hexdigest() == upload.sha256
    assert s3parts.tail_files(key) == {}
