"""A finished upload becomes a submission file by its id: every rule of a sent file applies,
and its bytes count once against the storage limit, as the upload while it arrives and as the
file once attached."""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.submissions.models import ResumableUpload, Submission, SubmissionFile
from apps.submissions.resumable import store
from apps.submissions.selectors import submission_storage_bytes
from tests.factories.submissions import make_submission
from tests.uploads.requests import send

pytestmark = pytest.mark.django_db

V8 = {"Upload-Draft-Interop-Version": "8"}


def finished_upload(client: APIClient, data: bytes) -> str:
    response = send(client, "POST", "/api/uploads/", data, headers={"Upload-Complete": "?1", **V8})
    assert response.status_code == HTTPStatus.CREATED
    return str(response.json()["upload_id"])


def attach(client: APIClient, submission: Submission, upload_id: str, filename: str) -> Any:
    return client.post(
        f"/api/submissions/{submission.pk}/files/",
        {"upload_id": upload_id, "filename": filename},
        format="json",
    )


@pytest.fixture
def draft(user: User) -> Submission:
    return make_submission(owner=user, files=())


def test_attach_makes_the_file_without_a_copy_and_counts_bytes_once(
    user: User, user_client: APIClient, draft: Submission
) -> None:
    data = os.urandom(1_500_000)
    upload_id = finished_upload(user_client, data)
    assert submission_storage_bytes(user_id=user.pk) == len(data)
    response = attach(user_client, draft, upload_id, "main.py")
    assert response.status_code == HTTPStatus.CREATED
    assert response.json()["sha256"] == hashlib.sha256(data).hexdigest()
    assert response.json()["size"] == len(data)
    file = SubmissionFile.objects.get(submission=draft)
    upload = ResumableUpload.objects.get()
    assert file.storage_name == upload.storage_key
    assert store.local_path(file.storage_name).read_bytes() == data
    assert submission_storage_bytes(user_id=user.pk) == len(data)
    listed = user_client.get(f"/api/submissions/{draft.pk}/files/").json()["files"]
    assert [f["filename"] for f in listed] == ["main.py"]


def test_same_attach_again_is_a_safe_retry(user_client: APIClient, draft: Submission) -> None:
    upload_id = finished_upload(user_client, b"print(1)\n")
    assert attach(user_client, draft, upload_id, "main.py").status_code == HTTPStatus.CREATED
    again = attach(user_client, draft, upload_id, "main.py")
    assert again.status_code == HTTPStatus.OK
    assert SubmissionFile.objects.filter(submission=draft).count() == 1


def test_an_attached_upload_cannot_become_a_second_file(
    user: User, user_client: APIClient, draft: Submission
) -> None:
    upload_id = finished_upload(user_client, b"print(1)\n")
    attach(user_client, draft, upload_id, "main.py")
    other = make_submission(owner=user, files=())
    response = attach(user_client, other, upload_id, "main.py")
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "upload_attached"


def test_unfinished_upload_is_409_upload_incomplete(
    user_client: APIClient, draft: Submission
) -> None:
    created = send(
        user_client, "POST", "/api/uploads/", b"abc", headers={"Upload-Complete": "?0", **V8}
    )
    response = attach(user_client, draft, created.json()["upload_id"], "main.py")
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "upload_incomplete"


def test_another_users_upload_is_404(
    user_client: APIClient, other_client: APIClient, draft: Submission
) -> None:
    upload_id = finished_upload(other_client, b"print(1)\n")
    response = attach(user_client, draft, upload_id, "main.py")
    assert response.status_code == HTTPStatus.NOT_FOUND


@pytest.mark.parametrize(
    ("filename", "code"),
    [("../evil.py", "invalid_filename"), ("notes.txt", "invalid_extension")],
)
def test_name_rules_apply(
    user_client: APIClient, draft: Submission, filename: str, code: str
) -> None:
    upload_id = finished_upload(user_client, b"x")
    response = attach(user_client, draft, upload_id, filename)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == code


def test_duplicate_name_with_other_content(
    user: User, user_client: APIClient, draft: Submission
) -> None:
    attach(user_client, draft, finished_upload(user_client, b"one"), "main.py")
    response = attach(user_client, draft, finished_upload(user_client, b"two"), "MAIN.py")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "duplicate_filename"


def test_too_many_files(user_client: APIClient, draft: Submission, settings: Any) -> None:
    settings.MAX_FILES_PER_SUBMISSION = 1
    attach(user_client, draft, finished_upload(user_client, b"one"), "main.py")
    response = attach(user_client, draft, finished_upload(user_client, b"two"), "other.py")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "too_many_files"


def test_sealed_submission(user: User, user_client: APIClient) -> None:
    sealed = make_submission(owner=user, files=(), status="pending")
    response = attach(user_client, sealed, finished_upload(user_client, b"x"), "main.py")
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "submission_sealed"


def test_archive_rules_apply(user_client: APIClient, draft: Submission) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("../escape.py", "x")
    response = attach(user_client, draft, finished_upload(user_client, buffer.getvalue()), "a.zip")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "unsafe_archive"
    garbage = attach(user_client, draft, finished_upload(user_client, b"not a zip"), "b.zip")
    assert garbage.json()["code"] == "invalid_archive"


def test_bytes_count_against_storage_as_they_arrive(
    user: User, user_client: APIClient, settings: Any
) -> None:
    settings.QUOTA_MAX_STORAGE_BYTES = 1000
    created = send(
        user_client, "POST", "/api/uploads/", b"a" * 600, headers={"Upload-Complete": "?0", **V8}
    )
    assert created.status_code == HTTPStatus.CREATED
    refused = send(
        user_client,
        "PATCH",
        created["Location"],
        b"b" * 500,
        content_type="application/partial-upload",
        headers={"Upload-Offset": "600", "Upload-Complete": "?0", **V8},
    )
    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert refused.json()["code"] == "storage_quota_exceeded"
    assert user_client.head(created["Location"], headers=V8)["Upload-Offset"] == "600"
    second = send(
        user_client, "POST", "/api/uploads/", b"c" * 500, headers={"Upload-Complete": "?1", **V8}
    )
    assert second.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert submission_storage_bytes(user_id=user.pk) == 600


def test_quotas_me_tells_the_upload_limits(user_client: APIClient, settings: Any) -> None:
    body = user_client.get("/api/quotas/me/").json()
    assert body["max_upload_file_size"] == settings.MAX_UPLOAD_FILE_SIZE
    assert body["max_resumable_upload_size"] == settings.MAX_RESUMABLE_UPLOAD_SIZE
