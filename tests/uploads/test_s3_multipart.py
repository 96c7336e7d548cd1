"""On S3 (moto's server on loopback) an upload's bytes go to an S3 multipart upload as they
arrive: whole parts of UPLOAD_S3_PART_SIZE, a small fsynced local tail, parts listed again by
the next writer (nothing is kept in the web process), CompleteMultipartUpload at the last
byte, and expiry aborts the multipart upload and removes the tail. The crash windows are made
as a killed writer leaves them (real files, real S3 calls) and then resumed."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from http import HTTPStatus
from io import StringIO
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from apps.submissions.models import ResumableUpload, SubmissionFile
from apps.submissions.resumable import s3parts, store
from apps.submissions.resumable.consume import upload_consume, upload_source
from apps.submissions.resumable.digest import ResumableSha256
from apps.submissions.resumable.services import AppendRequest, upload_append, upload_create
from tests.submissions.test_s3 import s3, s3_endpoint  # noqa: F401 - fixtures
from tests.uploads.requests import attach_to_new_draft
from tests.uploads.test_concurrency import BrokenBody, SlowBody

pytestmark = pytest.mark.django_db(transaction=True)

MiB = 1024 * 1024
PART = 5 * MiB


@pytest.fixture
def parts(settings: Any, tmp_path: Any) -> None:
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.UPLOAD_S3_PART_SIZE = PART
    settings.UPLOAD_CHECKPOINT_BYTES = MiB


def _append(user: User, upload_id: str, offset: int, data: bytes, **kwargs: Any) -> Any:
    body = kwargs.pop("body", None)
    return upload_append(
        user=user,
        upload_id=upload_id,
        request=AppendRequest(
            offset=offset,
            body=body if body is not None else SlowBody(data),
            content_length=len(data),
            **kwargs,
        ),
    )


def _multipart(client: Any) -> list[dict[str, Any]]:
    return list(client.list_multipart_uploads(Bucket=client.bucket).get("Uploads", []))


def _listed_parts(client: Any, key: str) -> list[int]:
    (pending,) = _multipart(client)
    assert pending["Key"] == key
    answer = client.list_parts(Bucket=client.bucket, Key=key, UploadId=pending["UploadId"])
    return [int(part["Size"]) for part in answer.get("Parts", [])]


def _object(client: Any, key: str) -> bytes:
    return bytes(client.get_object(Bucket=client.bucket, Key=key)["Body"].read())


def _keys(client: Any) -> list[str]:
    listing = client.list_objects_v2(Bucket=client.bucket)
    return sorted(item["Key"] for item in listing.get("Contents", []))


def test_parts_go_to_s3_as_bytes_arrive_and_a_resumed_upload_completes_whole(
    user: User,
    user_client: APIClient,
    s3: Any,  # noqa: F811 - the fixture
    parts: None,
    django_capture_on_commit_callbacks: Any,
) -> None:
    data = os.urandom(3 * PART + 12345)
    upload = upload_create(user=user, length=len(data))
    cut = 2 * PART + 777
    _append(user, upload.pk, 0, data, body=BrokenBody(data, cut))
    saved = ResumableUpload.objects.get()
    assert 2 * PART <= saved.offset <= cut
    assert _listed_parts(s3, saved.storage_key) == [PART, PART]
    assert _keys(s3) == []
    (tail,) = s3parts.tail_files(saved.storage_key).values()
    assert tail.read_bytes() == data[2 * PART : saved.offset]
    rest = data[saved.offset :]
    finished = _append(user, upload.pk, saved.offset, rest)
    assert finished.complete
    assert finished.sha256 == hashlib.sha256(data).hexdigest()
    assert _multipart(s3) == []
    assert _object(s3, saved.storage_key) == data
    assert s3parts.tail_files(saved.storage_key) == {}
    response = attach_to_new_draft(user_client, user, upload.pk, django_capture_on_commit_callbacks)
    assert response.status_code == HTTPStatus.CREATED
    assert response.json()["sha256"] == hashlib.sha256(data).hexdigest()
    file = SubmissionFile.objects.get()
    assert file.storage_name == saved.storage_key
    assert _keys(s3) == [saved.storage_key]
    assert _object(s3, file.storage_name) == data


def test_writer_killed_after_sending_a_part_before_the_tail_rolled(
    user: User,
    s3: Any,  # noqa: F811 - the fixture
    parts: None,
) -> None:
    data = os.urandom(2 * PART + 4321)
    upload = upload_create(user=user, length=len(data))
    first = PART + 2 * MiB
    _append(user, upload.pk, 0, data[:first])
    key = upload.storage_key
    assert _listed_parts(s3, key) == [PART]
    # What a writer killed between UploadPart and the roll leaves: part 1 sent, the old tail
    # (starting at part 1) still whole, the next tail not made.
    for path in s3parts.tail_files(key).values():
        path.unlink()
    old = store.local_path(key).with_name(store.local_path(key).name + ".tail1")
    old.write_bytes(data[:first])
    finished = _append(user, upload.pk, first, data[first:])
    assert finished.sha256 == hashlib.sha256(data).hexdigest()
    assert _object(s3, key) == data
    assert _multipart(s3) == []


def test_writer_killed_after_a_part_was_sent_before_its_file_went(
    user: User,
    s3: Any,  # noqa: F811 - the fixture
    parts: None,
) -> None:
    data = os.urandom(3 * PART + 4321)
    upload = upload_create(user=user, length=len(data))
    first = 2 * PART + MiB
    _append(user, upload.pk, 0, data[:first])
    key = upload.storage_key
    assert _listed_parts(s3, key) == [PART, PART]
    assert sorted(s3parts.tail_files(key)) == [3]
    # What a sending thread killed between UploadPart and removing the file leaves: part 2's
    # file beside part 3's, while S3 lists part 2.
    sent = store.local_path(key).with_name(store.local_path(key).name + ".tail2")
    sent.write_bytes(data[PART : 2 * PART])
    finished = _append(user, upload.pk, first, data[first:])
    assert finished.sha256 == hashlib.sha256(data).hexdigest()
    assert _object(s3, key) == data
    assert s3parts.tail_files(key) == {}


def test_writer_killed_after_saving_the_offset_before_sending_the_part(
    user: User,
    s3: Any,  # noqa: F811 - the fixture
    parts: None,
) -> None:
    data = os.urandom(PART + 3 * MiB)
    upload = upload_create(user=user, length=len(data))
    key = upload.storage_key
    # The offset and digest saved over an fsynced tail of more than a part, no part sent.
    tail = store.local_path(key).with_name(store.local_path(key).name + ".tail1")
    tail.parent.mkdir(parents=True, exist_ok=True)
    saved = PART + MiB
    tail.write_bytes(data[:saved] + b"never saved")
    digest = ResumableSha256()
    digest.update(data[:saved])
    ResumableUpload.objects.filter(pk=upload.pk).update(offset=saved, sha256_state=digest.state())
    finished = _append(user, upload.pk, saved, data[saved:])
    assert finished.sha256 == hashlib.sha256(data).hexdigest()
    assert _object(s3, key) == data


def test_writer_killed_between_saving_complete_and_completing_the_multipart_upload(
    user: User,
    user_client: APIClient,
    s3: Any,  # noqa: F811 - the fixture
    parts: None,
    django_capture_on_commit_callbacks: Any,
) -> None:
    data = os.urandom(PART + 2 * MiB + 99)
    upload = upload_create(user=user, length=None)
    key = upload.storage_key
    head = PART + MiB
    _append(user, upload.pk, 0, data[:head])
    # The killed writer had written and fsynced the last bytes, saved the row complete, and
    # even sent a short last part; CompleteMultipartUpload never ran.
    (tail,) = s3parts.tail_files(key).values()
    tail.write_bytes(data[PART:])
    (pending,) = _multipart(s3)
    s3.upload_part(
        Bucket=s3.bucket, Key=key, UploadId=pending["UploadId"], PartNumber=2, Body=b"partial"
    )
    ResumableUpload.objects.filter(pk=upload.pk).update(
        offset=len(data),
        length=len(data),
        complete=True,
        sha256=hashlib.sha256(data).hexdigest(),
    )
    response = attach_to_new_draft(user_client, user, upload.pk, django_capture_on_commit_callbacks)
    assert response.status_code == HTTPStatus.CREATED
    assert _object(s3, key) == data
    assert _multipart(s3) == []
    assert s3parts.tail_files(key) == {}


def test_a_bundle_reads_the_completed_object_and_consuming_deletes_it(
    user: User,
    s3: Any,  # noqa: F811 - the fixture
    parts: None,
) -> None:
    data = os.urandom(PART + 10)
    upload = upload_create(user=user, length=len(data))
    _append(user, upload.pk, 0, data)
    source = upload_source(user=user, upload_id=upload.pk)
    assert source.path.read_bytes() == data
    assert upload_consume(user=user, upload_id=upload.pk)
    assert _keys(s3) == []
    assert not source.path.exists()


def test_expiry_aborts_the_multipart_upload_and_removes_every_byte(
    user: User,
    s3: Any,  # noqa: F811 - the fixture
    parts: None,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    data = os.urandom(2 * PART + MiB)
    pending = upload_create(user=user, length=None)
    _append(user, pending.pk, 0, data)
    done = upload_create(user=user, length=None)
    _append(user, done.pk, 0, data[:MiB], complete=True)
    assert len(_multipart(s3)) == 1
    assert _keys(s3) == [done.storage_key]
    later = timezone.now() + dt.timedelta(hours=float(settings.UPLOAD_EXPIRY_HOURS), minutes=1)
    with time_machine.travel(later), django_capture_on_commit_callbacks(execute=True):
        call_command("cleanup", "--only", "uploads", stdout=StringIO())
    assert ResumableUpload.objects.count() == 0
    assert _multipart(s3) == []
    assert _keys(s3) == []
    for upload in (pending, done):
        assert s3parts.tail_files(upload.storage_key) == {}
        assert not store.local_path(upload.storage_key).exists()


def test_cancelled_upload_leaves_nothing_on_s3(
    user: User,
    user_client: APIClient,
    s3: Any,  # noqa: F811 - the fixture
    parts: None,
    django_capture_on_commit_callbacks: Any,
) -> None:
    upload = upload_create(user=user, length=None)
    _append(user, upload.pk, 0, os.urandom(PART + 5))
    with django_capture_on_commit_callbacks(execute=True):
        response = user_client.delete(
            f"/api/uploads/{upload.pk}/", headers={"Upload-Draft-Interop-Version": "8"}
        )
    assert response.status_code == HTTPStatus.NO_CONTENT
    assert _multipart(s3) == []
    assert _keys(s3) == []
    assert s3parts.tail_files(upload.storage_key) == {}
