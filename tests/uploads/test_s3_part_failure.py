"""On S3, a part that cannot be sent mid-append (the network to the S3 server cut while the
body is read, through a real TCP gate on loopback): the append answers 503, HEAD answers the
saved offset, every byte it names is in a listed part or in the tail files after them, and
the upload, resumed once the store is reachable again, completes to the right sha256."""

from __future__ import annotations

import hashlib
import io
import os
import uuid
from collections.abc import Iterator
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.config import Config
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.submissions.models import ResumableUpload
from apps.submissions.resumable import s3parts
from apps.submissions.resumable.services import upload_create
from tests.submissions.test_s3 import CREDENTIALS, s3_endpoint  # noqa: F401 - fixture
from tests.uploads.gate import Gate
from tests.uploads.requests import send

pytestmark = pytest.mark.django_db(transaction=True)

MiB = 1024 * 1024
PART = 5 * MiB
V8 = {"Upload-Draft-Interop-Version": "8"}


@pytest.fixture
def gated(s3_endpoint: str, settings: Any, tmp_path: Any) -> Iterator[tuple[Any, Gate]]:  # noqa: F811
    """The default storage on a fresh bucket reached through a gate (one attempt per call, so
    a cut fails at once); returns a client that reaches S3 directly, and the gate."""
    target = urlsplit(s3_endpoint)
    gate = Gate(str(target.hostname), int(target.port or 80))
    bucket = f"yoyaku-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", **CREDENTIALS)
    client.create_bucket(Bucket=bucket)
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": bucket,
                "endpoint_url": gate.endpoint,
                "region_name": "us-east-1",
                "access_key": CREDENTIALS["aws_access_key_id"],
                "secret_key": CREDENTIALS["aws_secret_access_key"],
                "file_overwrite": False,
                "default_acl": None,
                "client_config": Config(
                    retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=5
                ),
            },
        },
    }
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.UPLOAD_S3_PART_SIZE = PART
    settings.UPLOAD_CHECKPOINT_BYTES = MiB
    client.bucket = bucket
    try:
        yield client, gate
    finally:
        gate.cut()


class CutMidway(io.BytesIO):
    """A request body that cuts the gate once `at` bytes of it were read."""

    def __init__(self, data: bytes, at: int, gate: Gate) -> None:
        super().__init__(data)
        self.at = at
        self.gate = gate

    def read(self, size: int | None = -1, /) -> bytes:
        chunk = super().read(size)
        if 0 <= self.at <= self.tell():
            self.gate.cut()
            self.at = -1
        return chunk


def _patch(client: APIClient, upload_id: str, offset: int, body: Any, length: int) -> Any:
    return client.generic(
        "PATCH",
        f"/api/uploads/{upload_id}/",
        content_type="application/partial-upload",
        headers={"Upload-Offset": str(offset), "Upload-Complete": "?1", **V8},
        **{"CONTENT_LENGTH": str(length), "wsgi.input": body},
    )


def _head_offset(client: APIClient, upload_id: str) -> int:
    response = send(client, "HEAD", f"/api/uploads/{upload_id}/", headers=V8)
    assert response.status_code == HTTPStatus.NO_CONTENT
    return int(response["Upload-Offset"])


def _whole_parts(s3: Any, key: str) -> int:
    """How many whole parts S3 lists for the key's multipart upload."""
    (pending,) = s3.list_multipart_uploads(Bucket=s3.bucket)["Uploads"]
    answer = s3.list_parts(Bucket=s3.bucket, Key=key, UploadId=pending["UploadId"])
    sizes = [int(part["Size"]) for part in answer.get("Parts", [])]
    assert all(size == PART for size in sizes)
    return len(sizes)


def test_a_part_refused_mid_append_keeps_the_offset_durable_and_the_upload_resumable(
    user: User, user_client: APIClient, gated: tuple[Any, Gate]
) -> None:
    s3, gate = gated
    data = os.urandom(4 * PART + 123)
    upload = upload_create(user=user, length=len(data))
    body = CutMidway(data, PART + MiB, gate)
    response = _patch(user_client, upload.pk, 0, body, len(data))
    assert response.status_code == HTTPStatus.SERVICE_UNAVAILABLE
    assert response.json()["code"] == "service_unavailable"
    assert response["Retry-After"] == "1"
    saved = ResumableUpload.objects.get()
    assert not saved.complete
    assert saved.writer == ""
    offset = _head_offset(user_client, upload.pk)
    assert offset == saved.offset
    assert PART <= offset < len(data)
    assert body.tell() < len(data)  # the append stopped reading at the failure
    # What the offset names is stored: whole parts on S3, then one tail file per part.
    sent = _whole_parts(s3, saved.storage_key)
    tails = s3parts.tail_files(saved.storage_key)
    held, number = b"", sent + 1
    while number in tails:
        held += tails[number].read_bytes()
        number += 1
    assert sent * PART + len(held) >= offset
    assert held[: offset - sent * PART] == data[sent * PART : offset]

    # While the store is unreachable, an append answers 503 and keeps the offset.
    response = _patch(user_client, upload.pk, offset, io.BytesIO(data[offset:]), len(data) - offset)
    assert response.status_code == HTTPStatus.SERVICE_UNAVAILABLE
    assert _head_offset(user_client, upload.pk) == offset

    gate.reopen()
    response = _patch(user_client, upload.pk, offset, io.BytesIO(data[offset:]), len(data) - offset)
    assert response.status_code == HTTPStatus.OK
    assert response.json()["sha256"] == hashlib.sha256(data).hexdigest()
    assert s3.list_multipart_uploads(Bucket=s3.bucket).get("Uploads", []) == []
    whole = s3.get_object(Bucket=s3.bucket, Key=saved.storage_key)["Body"].read()
    assert whole == data
    assert s3parts.tail_files(saved.storage_key) == {}
