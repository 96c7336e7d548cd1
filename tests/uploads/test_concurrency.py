"""Appends racing in real threads: of concurrent appends at one offset exactly one lands and
the others are refused with the offset, and the stored bytes and digest are the winner's; a
body that breaks off keeps exactly the bytes saved up to its last checkpoint; concurrent
uploads of one user never pass the storage limit."""

from __future__ import annotations

import hashlib
import io
import os
from typing import Any

import pytest
from django.contrib.auth.models import User

from apps.quotas.exceptions import StorageQuotaExceeded
from apps.submissions.exceptions import UploadOffsetMismatch
from apps.submissions.models import ResumableUpload
from apps.submissions.resumable import store
from apps.submissions.resumable.services import AppendRequest, upload_append, upload_create
from apps.submissions.selectors import submission_storage_bytes
from tests.concurrency import run_concurrently
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db(transaction=True)

MiB = 1024 * 1024


class SlowBody(io.BytesIO):
    """A body that arrives in small reads (so racing appends overlap in time)."""

    def read(self, size: int | None = -1, /) -> bytes:
        return super().read(min(size if size is not None and size >= 0 else 1 << 30, 64 * 1024))


class BrokenBody(io.BytesIO):
    """A body whose connection breaks after `cut` bytes (a server that streams bodies sees
    the read fail)."""

    def __init__(self, data: bytes, cut: int) -> None:
        super().__init__(data)
        self.cut = cut

    def read(self, size: int | None = -1, /) -> bytes:
        left = self.cut - self.tell()
        if left <= 0:
            raise ConnectionResetError("client went away")
        return super().read(min(left, size if size is not None and size >= 0 else left))


def _append(user: User, upload_id: str, offset: int, data: bytes, body: Any = None) -> Any:
    return upload_append(
        user=user,
        upload_id=upload_id,
        request=AppendRequest(
            offset=offset,
            body=body if body is not None else SlowBody(data),
            content_length=len(data),
            complete=False,
        ),
    )


@pytest.mark.parametrize("writers", [2, 8])
def test_concurrent_appends_at_one_offset_one_wins(writers: int, settings: Any) -> None:
    settings.UPLOAD_CHECKPOINT_BYTES = 256 * 1024
    user = make_user(username="alice")
    upload = upload_create(user=user, length=None)
    bodies = [os.urandom(2 * MiB) for _ in range(writers)]
    outcomes = run_concurrently(lambda i: _append(user, upload.pk, 0, bodies[i]), writers)
    winners = [i for i, outcome in enumerate(outcomes) if outcome.ok]
    assert len(winners) == 1
    for outcome in outcomes:
        if not outcome.ok:
            assert isinstance(outcome.error, UploadOffsetMismatch)
    saved = ResumableUpload.objects.get()
    won = bodies[winners[0]]
    assert saved.offset == len(won)
    assert saved.writer == ""
    assert store.local_path(saved.storage_key).read_bytes() == won
    finished = upload_append(
        user=user,
        upload_id=upload.pk,
        request=AppendRequest(
            offset=len(won), body=io.BytesIO(b"end"), content_length=3, complete=True
        ),
    )
    assert finished.sha256 == hashlib.sha256(won + b"end").hexdigest()


def test_body_that_breaks_off_keeps_what_was_saved(settings: Any) -> None:
    settings.UPLOAD_CHECKPOINT_BYTES = MiB
    user = make_user(username="alice")
    upload = upload_create(user=user, length=None)
    data = os.urandom(8 * MiB)
    cut = 5 * MiB + 12345
    _append(user, upload.pk, 0, data, body=BrokenBody(data, cut))
    saved = ResumableUpload.objects.get()
    assert saved.offset <= cut
    assert saved.offset >= 5 * MiB
    assert store.local_path(saved.storage_key).read_bytes()[: saved.offset] == data[: saved.offset]
    rest = data[saved.offset :]
    finished = upload_append(
        user=user,
        upload_id=upload.pk,
        request=AppendRequest(
            offset=saved.offset, body=io.BytesIO(rest), content_length=len(rest), complete=True
        ),
    )
    assert finished.sha256 == hashlib.sha256(data).hexdigest()
    assert store.local_path(saved.storage_key).read_bytes() == data


def test_concurrent_uploads_never_pass_the_storage_limit(settings: Any) -> None:
    settings.QUOTA_MAX_STORAGE_BYTES = 5 * MiB
    settings.UPLOAD_CHECKPOINT_BYTES = 256 * 1024
    user = make_user(username="alice")
    uploads = [upload_create(user=user, length=None) for _ in range(6)]
    outcomes = run_concurrently(
        lambda i: _append(user, uploads[i].pk, 0, os.urandom(2 * MiB)), len(uploads)
    )
    for outcome in outcomes:
        if not outcome.ok:
            assert isinstance(outcome.error, StorageQuotaExceeded)
    assert submission_storage_bytes(user_id=user.pk) <= 5 * MiB
    for upload in ResumableUpload.objects.all():
        assert store.local_path(upload.storage_key).stat().st_size >= upload.offset
