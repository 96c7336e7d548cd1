"""Uploads not attached within UPLOAD_EXPIRY_HOURS of their last byte expire: the cleanup
removes their rows and bytes (and counts them), and keeps live and attached uploads."""

from __future__ import annotations

import datetime as dt
from http import HTTPStatus
from io import StringIO
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from apps.submissions.models import ResumableUpload
from apps.submissions.resumable import store
from apps.submissions.selectors import submission_storage_bytes
from tests.factories.submissions import make_submission
from tests.metrics import scrape
from tests.uploads.requests import send

pytestmark = pytest.mark.django_db

V8 = {"Upload-Draft-Interop-Version": "8"}


def upload(client: APIClient, data: bytes, *, complete: bool) -> str:
    response = send(
        client,
        "POST",
        "/api/uploads/",
        data,
        headers={"Upload-Complete": "?1" if complete else "?0", **V8},
    )
    return str(response.json()["upload_id"])


def test_cleanup_removes_expired_uploads_and_their_bytes(
    user: User, user_client: APIClient, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    stale = upload(user_client, b"a" * 100, complete=False)
    attached = upload(user_client, b"print(1)\n", complete=True)
    draft = make_submission(owner=user, files=())
    user_client.post(
        f"/api/submissions/{draft.pk}/files/",
        {"upload_id": attached, "filename": "main.py"},
        format="json",
    )
    hours = float(settings.UPLOAD_EXPIRY_HOURS)
    later = timezone.now() + dt.timedelta(hours=hours, minutes=1)
    with time_machine.travel(later):
        fresh = upload(user_client, b"b" * 50, complete=False)
    keys = {u.pk: u.storage_key for u in ResumableUpload.objects.all()}
    before = scrape(settings).value("yoyaku_resumable_upload_expiries_total")
    out = StringIO()
    with time_machine.travel(later), django_capture_on_commit_callbacks(execute=True):
        call_command("cleanup", "--only", "uploads", stdout=out)
    remaining = set(ResumableUpload.objects.values_list("id", flat=True))
    assert remaining == {attached, fresh}
    assert not store.local_path(keys[stale]).exists()
    assert store.local_path(keys[attached]).exists()
    assert store.local_path(keys[fresh]).exists()
    assert submission_storage_bytes(user_id=user.pk) == len(b"print(1)\n") + 50
    after = scrape(settings).value("yoyaku_resumable_upload_expiries_total")
    assert after == before + 1


def test_an_append_moves_the_expiry(user_client: APIClient, settings: Any) -> None:
    created = send(
        user_client, "POST", "/api/uploads/", b"abc", headers={"Upload-Complete": "?0", **V8}
    )
    hours = float(settings.UPLOAD_EXPIRY_HOURS)
    with time_machine.travel(timezone.now() + dt.timedelta(hours=hours * 0.75)):
        appended = send(
            user_client,
            "PATCH",
            created["Location"],
            b"def",
            content_type="application/partial-upload",
            headers={"Upload-Offset": "3", "Upload-Complete": "?0", **V8},
        )
        assert appended.status_code == HTTPStatus.NO_CONTENT
    with time_machine.travel(timezone.now() + dt.timedelta(hours=hours * 1.5)):
        assert user_client.head(created["Location"], headers=V8)["Upload-Offset"] == "6"
