"""On S3 (moto's server on loopback) an upload small enough for one part completes as a
one-part multipart upload, and attaching names that object (no copy, nothing left locally)."""

from __future__ import annotations

import hashlib
import os
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.submissions.models import ResumableUpload, SubmissionFile
from apps.submissions.resumable import store
from tests.submissions.test_s3 import s3, s3_endpoint  # noqa: F401 - fixtures
from tests.uploads.requests import attach_to_new_draft, send

pytestmark = pytest.mark.django_db


def test_attach_names_the_completed_object_in_the_bucket(
    user: User,
    user_client: APIClient,
    s3: Any,  # noqa: F811 - the fixture
    django_capture_on_commit_callbacks: Any,
) -> None:
    data = os.urandom(3 * 1024 * 1024 + 5)
    created = send(
        user_client,
        "POST",
        "/api/uploads/",
        data,
        headers={"Upload-Complete": "?1", "Upload-Draft-Interop-Version": "8"},
    )
    assert created.status_code == HTTPStatus.CREATED
    upload = ResumableUpload.objects.get()
    local = store.local_path(upload.storage_key)
    assert not local.exists()
    assert s3.get_object(Bucket=s3.bucket, Key=upload.storage_key)["Body"].read() == data
    response = attach_to_new_draft(user_client, user, upload.pk, django_capture_on_commit_callbacks)
    assert response.status_code == HTTPStatus.CREATED
    assert response.json()["sha256"] == hashlib.sha256(data).hexdigest()
    file = SubmissionFile.objects.get()
    assert file.storage_name == upload.storage_key
    stored = s3.get_object(Bucket=s3.bucket, Key=file.storage_name)["Body"].read()
    assert stored == data
    assert not local.exists()


def test_a_draft_created_from_an_upload_names_the_completed_object(
    user_client: APIClient,
    s3: Any,  # noqa: F811 - the fixture
    django_capture_on_commit_callbacks: Any,
) -> None:
    data = os.urandom(2 * 1024 * 1024 + 3)
    created = send(
        user_client,
        "POST",
        "/api/uploads/",
        data,
        headers={"Upload-Complete": "?1", "Upload-Draft-Interop-Version": "8"},
    )
    upload = ResumableUpload.objects.get(pk=created.json()["upload_id"])
    local = store.local_path(upload.storage_key)
    with django_capture_on_commit_callbacks(execute=True):
        response = user_client.post(
            "/api/submissions/", {"upload_id": upload.pk, "filename": "main.py"}, format="json"
        )
    assert response.status_code == HTTPStatus.CREATED, response.json()
    assert response.json()["submission_id"]
    file = SubmissionFile.objects.get()
    assert file.storage_name == upload.storage_key  # the multipart upload's object, no copy
    stored = s3.get_object(Bucket=s3.bucket, Key=file.storage_name)["Body"].read()
    assert hashlib.sha256(stored).hexdigest() == file.sha256 == hashlib.sha256(data).hexdigest()
    assert not local.exists()
