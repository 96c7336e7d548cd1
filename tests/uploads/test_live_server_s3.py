"""The web process (gunicorn on loopback) on S3 (moto's server on loopback) killed with
SIGKILL mid-upload: the parts it sent and its fsynced tail hold every saved byte, and a new
web process, which knows nothing but the row and what S3 lists, resumes and completes the
multipart upload with the right sha256 and a whole object."""

from __future__ import annotations

import hashlib
import os
from typing import Any

import pytest

from apps.submissions.models import ResumableUpload
from apps.submissions.resumable import s3parts
from tests.factories.tokens import make_token
from tests.factories.users import make_user
from tests.processes import Start, start_gunicorn
from tests.submissions.test_s3 import CREDENTIALS, s3, s3_endpoint  # noqa: F401 - fixtures
from tests.uploads.live import MiB, resumed_on_a_new_web_process, upload_killed_midway

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
    path, results = upload_killed_midway(port, web, token, data, past=13 * MiB)
    assert isinstance(results[0], OSError)
    saved = ResumableUpload.objects.get()
    assert 13 * MiB < saved.offset < len(data)
    key = saved.storage_key
    (pending,) = s3.list_multipart_uploads(Bucket=s3.bucket)["Uploads"]
    listed = s3.list_parts(Bucket=s3.bucket, Key=key, UploadId=pending["UploadId"])["Parts"]
    assert len(listed) >= 2
    assert all(int(part["Size"]) == PART for part in listed)
    # Every saved byte is in a sent part or in the tail files (one per part) after them.
    tails = s3parts.tail_files(key)
    assert tails
    first = min(tails)
    assert first <= len(listed) + 1
    number, held = first, (first - 1) * PART
    while number in tails:
        held += tails[number].stat().st_size
        number += 1
    assert held >= saved.offset

    upload = resumed_on_a_new_web_process(start_process, env, token, path, data, saved=saved.offset)
    assert s3.list_multipart_uploads(Bucket=s3.bucket).get("Uploads", []) == []
    whole = s3.get_object(Bucket=s3.bucket, Key=key)["Body"].read()
    assert hashlib.sha256(whole).hexdigest() == upload.sha256
    assert s3parts.tail_files(key) == {}
