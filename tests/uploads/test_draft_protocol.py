"""Conformance with the IETF draft "Resumable Uploads for HTTP" at interop version 8, written
from the draft's text: creation with `Upload-Complete`, offset retrieval, appends as
`application/partial-upload`, the 409 with problem details for a mismatching offset, the
errors for a completed upload and an inconsistent length, cancellation and `Upload-Limit`."""

from __future__ import annotations

import hashlib
import os
from http import HTTPStatus
from typing import Any

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from apps.submissions.models import ResumableUpload
from apps.submissions.resumable import store
from tests.uploads.requests import send

pytestmark = pytest.mark.django_db

V8 = {"Upload-Draft-Interop-Version": "8"}
PROBLEMS = "https://iana.org/assignments/http-problem-types#"


def create(client: APIClient, body: bytes = b"", *, complete: bool, **headers: str) -> Any:
    return send(
        client,
        "POST",
        "/api/uploads/",
        body,
        headers={"Upload-Complete": "?1" if complete else "?0", **V8, **headers},
    )


def append(client: APIClient, location: str, offset: int, body: bytes, *, complete: bool) -> Any:
    return send(
        client,
        "PATCH",
        location,
        body,
        content_type="application/partial-upload",
        headers={"Upload-Offset": str(offset), "Upload-Complete": "?1" if complete else "?0", **V8},
    )


def test_creation_with_all_bytes_completes_the_upload(user_client: APIClient) -> None:
    data = os.urandom(300_000)
    response = create(user_client, data, complete=True)
    assert response.status_code == HTTPStatus.CREATED
    assert response["Upload-Complete"] == "?1"
    assert response["Upload-Offset"] == str(len(data))
    assert response["Location"].endswith(f"/api/uploads/{response.json()['upload_id']}/")
    assert "max-size=" in response["Upload-Limit"]
    assert response.json()["sha256"] == hashlib.sha256(data).hexdigest()


def test_creation_then_appends_and_offset_retrieval(user_client: APIClient) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    created = create(user_client, data[:1000], complete=False, **{"Upload-Length": str(len(data))})
    assert created.status_code == HTTPStatus.CREATED
    assert created["Upload-Complete"] == "?0"
    location = created["Location"]
    head = user_client.head(location, headers=V8)
    assert head.status_code == HTTPStatus.NO_CONTENT
    assert head["Upload-Offset"] == "1000"
    assert head["Upload-Length"] == str(len(data))
    assert head["Upload-Complete"] == "?0"
    assert head["Cache-Control"] == "no-store"
    middle = append(user_client, location, 1000, data[1000:2_000_000], complete=False)
    assert middle.status_code == HTTPStatus.NO_CONTENT
    assert middle["Upload-Offset"] == "2000000"
    last = append(user_client, location, 2_000_000, data[2_000_000:], complete=True)
    assert last.status_code == HTTPStatus.OK
    assert last["Upload-Complete"] == "?1"
    assert last.json()["sha256"] == hashlib.sha256(data).hexdigest()
    upload = ResumableUpload.objects.get()
    assert store.local_path(upload.storage_key).read_bytes() == data


def test_length_learned_at_the_end(user_client: APIClient) -> None:
    created = create(user_client, b"abc", complete=False)
    assert "Upload-Length" not in created
    last = append(user_client, created["Location"], 3, b"def", complete=True)
    assert last["Upload-Length"] == "6"
    assert last.json()["length"] == 6


def test_wrong_offset_is_409_with_problem_details_and_the_right_offset(
    user_client: APIClient,
) -> None:
    created = create(user_client, b"x" * 10, complete=False)
    response = append(user_client, created["Location"], 4, b"yy", complete=False)
    assert response.status_code == HTTPStatus.CONFLICT
    assert response["Content-Type"] == "application/problem+json"
    assert response["Upload-Offset"] == "10"
    body = response.json()
    assert body["type"] == PROBLEMS + "mismatching-upload-offset"
    assert body["expected-offset"] == 10
    assert body["provided-offset"] == 4
    assert body["code"] == "upload_offset_mismatch"
    assert user_client.head(created["Location"], headers=V8)["Upload-Offset"] == "10"


def test_append_to_a_completed_upload_is_refused(user_client: APIClient) -> None:
    created = create(user_client, b"done", complete=True)
    response = append(user_client, created["Location"], 4, b"more", complete=True)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["type"] == PROBLEMS + "completed-upload"


def test_inconsistent_length_is_refused(user_client: APIClient) -> None:
    created = create(user_client, b"12345", complete=False, **{"Upload-Length": "8"})
    too_long = append(user_client, created["Location"], 5, b"6789", complete=True)
    assert too_long.status_code == HTTPStatus.BAD_REQUEST
    assert too_long.json()["type"] == PROBLEMS + "inconsistent-upload-length"
    short = append(user_client, created["Location"], 5, b"67", complete=True)
    assert short.json()["type"] == PROBLEMS + "inconsistent-upload-length"
    assert user_client.head(created["Location"], headers=V8)["Upload-Offset"] == "5"


def test_append_needs_partial_upload_media_type(user_client: APIClient) -> None:
    created = create(user_client, b"", complete=False)
    response = send(
        user_client,
        "PATCH",
        created["Location"],
        b"abc",
        headers={"Upload-Offset": "0", "Upload-Complete": "?0", **V8},
    )
    assert response.status_code == HTTPStatus.UNSUPPORTED_MEDIA_TYPE
    assert response.json()["code"] == "unsupported_media_type"


def test_cancellation_removes_the_upload_and_its_bytes(
    user_client: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    created = create(user_client, b"abc", complete=False)
    upload = ResumableUpload.objects.get()
    assert store.local_path(upload.storage_key).exists()
    with django_capture_on_commit_callbacks(execute=True):
        deleted = user_client.delete(created["Location"], headers=V8)
    assert deleted.status_code == HTTPStatus.NO_CONTENT
    assert user_client.head(created["Location"], headers=V8).status_code == HTTPStatus.NOT_FOUND
    assert not store.local_path(upload.storage_key).exists()


def test_options_shows_the_limits_without_credentials(api_client: APIClient) -> None:
    response = api_client.options("/api/uploads/")
    assert response.status_code == HTTPStatus.NO_CONTENT
    assert response["Upload-Limit"].startswith(f"max-size={settings.MAX_RESUMABLE_UPLOAD_SIZE}")
    assert response["Tus-Max-Size"] == str(settings.MAX_RESUMABLE_UPLOAD_SIZE)


def test_length_over_the_maximum_is_413_at_creation(user_client: APIClient, settings: Any) -> None:
    settings.MAX_RESUMABLE_UPLOAD_SIZE = 1000
    response = create(user_client, b"", complete=False, **{"Upload-Length": "1001"})
    assert response.status_code == HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    assert response.json()["code"] == "upload_too_large"
    assert not ResumableUpload.objects.exists()


def test_uploads_need_authentication(api_client: APIClient) -> None:
    response = create(api_client, b"abc", complete=True)
    assert response.status_code == HTTPStatus.UNAUTHORIZED


def test_another_users_upload_is_404(user_client: APIClient, other_client: APIClient) -> None:
    created = create(user_client, b"abc", complete=False)
    location = created["Location"]
    assert other_client.head(location, headers=V8).status_code == HTTPStatus.NOT_FOUND
    response = append(other_client, location, 3, b"d", complete=False)
    assert response.status_code == HTTPStatus.NOT_FOUND
    assert response.json()["code"] == "not_found"
    assert other_client.delete(location).status_code == HTTPStatus.NOT_FOUND


def test_creation_without_a_protocol_header_is_invalid(user_client: APIClient) -> None:
    response = send(user_client, "POST", "/api/uploads/", b"abc", content_type="text/plain")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_request"


@pytest.mark.parametrize("value", ["yes", "1", "?2", ""])
def test_malformed_upload_complete_is_invalid(user_client: APIClient, value: str) -> None:
    response = send(user_client, "POST", "/api/uploads/", headers={"Upload-Complete": value})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_request"
