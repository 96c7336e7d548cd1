"""Races an attacker runs against resumable uploads with real threads: appends to several
uploads at once that together pass the storage limit (the bytes past it must not stay on
disk), one finished upload attached to two drafts at once, and an attach racing the upload's
cancellation. Each race is run on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import os
import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from apps.core.exceptions import NotFound
from apps.quotas.exceptions import StorageQuotaExceeded
from apps.submissions.exceptions import TooManyUploads, UploadAttached
from apps.submissions.models import ResumableUpload, SubmissionFile
from apps.submissions.resumable import store
from apps.submissions.resumable.services import (
    AppendRequest,
    upload_append,
    upload_create,
    upload_delete,
)
from apps.submissions.selectors import submission_storage_bytes
from apps.submissions.services.attach import submission_file_attach
from tests.concurrency import run_concurrently
from tests.factories.submissions import make_submission
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db(transaction=True)

MiB = 1024 * 1024


class GatedBody(io.BytesIO):
    """A body whose first read waits until every racing append has begun reading: each has
    then measured the room left under the limit before any of them saved a byte."""

    def __init__(self, data: bytes, gate: threading.Barrier) -> None:
        super().__init__(data)
        self.gate = gate
        self.opened = False

    def read(self, size: int | None = -1, /) -> bytes:
        if not self.opened:
            self.opened = True
            self.gate.wait(timeout=60)
        return super().read(size)


def _finished(user: User, data: bytes) -> ResumableUpload:
    upload = upload_create(user=user, length=len(data))
    return upload_append(
        user=user,
        upload_id=upload.pk,
        request=AppendRequest(offset=0, body=io.BytesIO(data), content_length=len(data)),
    )


def _on_disk(upload: ResumableUpload) -> int:
    path = store.local_path(upload.storage_key)
    return path.stat().st_size if path.exists() else 0


@pytest.mark.parametrize("checksum", [False, True])
def test_appends_racing_past_the_storage_limit_leave_no_bytes_beyond_it_on_disk(
    settings: Any, checksum: bool
) -> None:
    settings.QUOTA_MAX_STORAGE_BYTES = 2 * MiB
    writers = 4
    user = make_user(username="mallory")
    uploads = [upload_create(user=user, length=None) for _ in range(writers)]
    bodies = [os.urandom(2 * MiB) for _ in range(writers)]
    gate = threading.Barrier(writers)

    def append(index: int) -> ResumableUpload:
        data = bodies[index]
        return upload_append(
            user=user,
            upload_id=uploads[index].pk,
            request=AppendRequest(
                offset=0,
                body=GatedBody(data, gate),
                content_length=len(data),
                complete=True,
                checksum=hashlib.sha256(data).digest() if checksum else None,
            ),
        )

    outcomes = run_concurrently(append, writers)
    assert sum(outcome.ok for outcome in outcomes) == 1
    for outcome in outcomes:
        if not outcome.ok:
            assert isinstance(outcome.error, StorageQuotaExceeded), outcome.error
    assert submission_storage_bytes(user_id=user.pk) == 2 * MiB
    # The refused appends' bytes are gone from the disk too: nothing is stored past the
    # offsets the limit admitted (they were held until the upload expired, a day later).
    stored = [ResumableUpload.objects.get(pk=upload.pk) for upload in uploads]
    assert [_on_disk(upload) for upload in stored] == [upload.offset for upload in stored]
    assert sum(_on_disk(upload) for upload in stored) <= 2 * MiB


def test_one_upload_attached_to_two_drafts_at_once_becomes_one_file(settings: Any) -> None:
    user = make_user(username="mallory")
    data = os.urandom(300_000)
    rounds = 4
    for _ in range(rounds):
        upload = _finished(user, data)
        drafts = [make_submission(owner=user, files=()) for _ in range(2)]

        def attach(index: int, u: ResumableUpload = upload, d: list[Any] = drafts) -> object:
            return submission_file_attach(
                user=user, submission_id=d[index].pk, upload_id=u.pk, filename="main.py"
            )

        outcomes = run_concurrently(attach, 2)
        assert sum(outcome.ok for outcome in outcomes) == 1
        assert all(isinstance(o.error, UploadAttached) for o in outcomes if not o.ok)
        [file] = SubmissionFile.objects.filter(storage_name=upload.storage_key)
        assert store.local_path(file.storage_name).read_bytes() == data
    assert SubmissionFile.objects.count() == rounds
    # Each upload's bytes count once (as its one file).
    assert submission_storage_bytes(user_id=user.pk) == rounds * len(data)


def test_an_attach_racing_the_uploads_cancellation_leaves_a_whole_file_or_nothing() -> None:
    user = make_user(username="mallory")
    data = os.urandom(200_000)
    for _ in range(6):
        upload = _finished(user, data)
        draft = make_submission(owner=user, files=())

        def act(index: int, u: ResumableUpload = upload, d: Any = draft) -> object:
            if index == 0:
                return submission_file_attach(
                    user=user, submission_id=d.pk, upload_id=u.pk, filename="main.py"
                )
            upload_delete(user=user, upload_id=u.pk)
            return None

        attached, deleted = run_concurrently(act, 2)
        file = SubmissionFile.objects.filter(submission=draft).first()
        row = ResumableUpload.objects.filter(pk=upload.pk).first()
        if attached.ok:
            # The file stands whole, and its bytes are the upload's (never removed).
            assert file is not None
            assert store.local_path(file.storage_name).read_bytes() == data
            assert row is not None
            assert row.attached_at is not None
            assert deleted.ok or isinstance(deleted.error, UploadAttached | NotFound)
        else:
            assert isinstance(attached.error, UploadAttached | NotFound), attached.error
            assert deleted.ok
            assert file is None
            assert row is None
            assert not store.local_path(upload.storage_key).exists()


def test_racing_creations_never_hold_more_open_uploads_than_the_limit(settings: Any) -> None:
    settings.UPLOAD_MAX_OPEN_PER_USER = 3
    user = make_user(username="mallory")
    outcomes = run_concurrently(lambda i: upload_create(user=user, length=None), 8)
    assert sum(outcome.ok for outcome in outcomes) == 3
    assert all(isinstance(o.error, TooManyUploads) for o in outcomes if not o.ok)
    assert ResumableUpload.objects.filter(owner_id=user.pk).count() == 3
    # A cancelled or expired upload frees its place; another user's count is their own.
    first = ResumableUpload.objects.filter(owner_id=user.pk).first()
    assert first is not None
    upload_delete(user=user, upload_id=first.pk)
    upload_create(user=user, length=None)
    with pytest.raises(TooManyUploads):
        upload_create(user=user, length=None)
    upload_create(user=make_user(username="someone"), length=None)
    ResumableUpload.objects.filter(owner_id=user.pk).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)
    )
    upload_create(user=user, length=None)
