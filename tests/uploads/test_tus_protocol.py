"""Conformance with tus 1.0.0 (core, creation, creation-with-upload, expiration, checksum with
sha256, termination), written from the protocol's text."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import os
from http import HTTPStatus
from typing import Any

import pytest
import time_machine
from django.conf import settings
from django.utils import timezone
from django.utils.http import parse_http_date
from rest_framework.test import APIClient

from apps.submissions.models import ResumableUpload
from apps.submissions.resumable import store
from tests.uploads.requests import send

pytestmark = pytest.mark.django_db

TUS = {"Tus-Resumable": "1.0.0"}
OFFSET_TYPE = "application/offset+octet-stream"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def create(
    client: APIClient, length: int, body: bytes = b"", *, headers: dict[str, str] | None = None
) -> Any:
    return send(
        client,
        "POST",
        "/api/uploads/",
        body,
        content_type=OFFSET_TYPE if body else "application/octet-stream",
        headers={**TUS, "Upload-Length": str(length), **(headers or {})},
    )


def patch(client: APIClient, location: str, offset: int, body: bytes, **headers: str) -> Any:
    return send(
        client,
        "PATCH",
        location,
        body,
        content_type=OFFSET_TYPE,
        headers={**TUS, "Upload-Offset": str(offset), **headers},
    )


def test_options_advertises_version_extensions_and_limits(api_client: APIClient) -> None:
    response = api_client.options("/api/uploads/")
    assert response.status_code == HTTPStatus.NO_CONTENT
    assert response["Tus-Resumable"] == "1.0.0"
    assert response["Tus-Version"] == "1.0.0"
    extensions = set(response["Tus-Extension"].split(","))
    assert extensions == {
        "creation",
        "creation-with-upload",
        "expiration",
        "checksum",
        "termination",
    }
    assert response["Tus-Checksum-Algorithm"] == "sha256"
    assert response["Tus-Max-Size"] == str(settings.MAX_RESUMABLE_UPLOAD_SIZE)


def test_create_head_patch_to_the_end(user_client: APIClient) -> None:
    data = os.urandom(2_500_000)
    created = create(
        user_client, len(data), headers={"Upload-Metadata": f"filename {b64('a.zip')}"}
    )
    assert created.status_code == HTTPStatus.CREATED
    assert created["Tus-Resumable"] == "1.0.0"
    location = created["Location"]
    head = user_client.head(location, headers=TUS)
    assert head.status_code == HTTPStatus.OK
    assert head["Upload-Offset"] == "0"
    assert head["Upload-Length"] == str(len(data))
    assert head["Cache-Control"] == "no-store"
    assert head["Tus-Resumable"] == "1.0.0"
    first = patch(user_client, location, 0, data[:1_000_000])
    assert first.status_code == HTTPStatus.NO_CONTENT
    assert first["Upload-Offset"] == "1000000"
    assert first["Tus-Resumable"] == "1.0.0"
    last = patch(user_client, location, 1_000_000, data[1_000_000:])
    assert last.status_code == HTTPStatus.NO_CONTENT
    assert last["Upload-Offset"] == str(len(data))
    upload = ResumableUpload.objects.get()
    assert upload.complete
    assert upload.sha256 == hashlib.sha256(data).hexdigest()
    assert upload.metadata == {"filename": "a.zip"}
    assert store.local_path(upload.storage_key).read_bytes() == data


def test_creation_with_upload(user_client: APIClient) -> None:
    created = create(user_client, 10, b"hello")
    assert created.status_code == HTTPStatus.CREATED
    assert created["Upload-Offset"] == "5"
    assert patch(user_client, created["Location"], 5, b"world")["Upload-Offset"] == "10"


def test_wrong_offset_is_409(user_client: APIClient) -> None:
    created = create(user_client, 10, b"hello")
    response = patch(user_client, created["Location"], 3, b"xx")
    assert response.status_code == HTTPStatus.CONFLICT
    assert response["Upload-Offset"] == "5"
    assert response["Tus-Resumable"] == "1.0.0"
    assert response.json()["code"] == "upload_offset_mismatch"


def test_patch_needs_the_offset_media_type(user_client: APIClient) -> None:
    created = create(user_client, 10)
    response = send(
        user_client,
        "PATCH",
        created["Location"],
        b"abc",
        content_type="application/partial-upload",
        headers={**TUS, "Upload-Offset": "0"},
    )
    assert response.status_code == HTTPStatus.UNSUPPORTED_MEDIA_TYPE


def test_unsupported_version_is_412_with_tus_version(user_client: APIClient) -> None:
    response = create(user_client, 10, headers={"Tus-Resumable": "0.2.2"})
    assert response.status_code == HTTPStatus.PRECONDITION_FAILED
    assert response["Tus-Version"] == "1.0.0"
    assert not ResumableUpload.objects.exists()


def test_upload_length_is_required_and_bounded(user_client: APIClient, settings: Any) -> None:
    missing = send(user_client, "POST", "/api/uploads/", headers=TUS)
    assert missing.status_code == HTTPStatus.BAD_REQUEST
    settings.MAX_RESUMABLE_UPLOAD_SIZE = 100
    too_large = create(user_client, 101)
    assert too_large.status_code == HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    assert too_large["Tus-Resumable"] == "1.0.0"


def test_body_past_the_length_is_refused_and_nothing_kept(user_client: APIClient) -> None:
    created = create(user_client, 4)
    response = patch(user_client, created["Location"], 0, b"12345")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert user_client.head(created["Location"], headers=TUS)["Upload-Offset"] == "0"


def test_checksum_match_and_mismatch(user_client: APIClient) -> None:
    created = create(user_client, 8)
    good = base64.b64encode(hashlib.sha256(b"abcd").digest()).decode()
    ok = patch(
        user_client, created["Location"], 0, b"abcd", **{"Upload-Checksum": f"sha256 {good}"}
    )
    assert ok.status_code == HTTPStatus.NO_CONTENT
    wrong = patch(
        user_client, created["Location"], 4, b"efgh", **{"Upload-Checksum": f"sha256 {good}"}
    )
    assert wrong.status_code == 460
    assert wrong.json()["code"] == "checksum_mismatch"
    assert user_client.head(created["Location"], headers=TUS)["Upload-Offset"] == "4"
    upload = ResumableUpload.objects.get()
    assert store.local_path(upload.storage_key).read_bytes() == b"abcd"
    md5 = patch(user_client, created["Location"], 4, b"efgh", **{"Upload-Checksum": "md5 AAAA"})
    assert md5.status_code == HTTPStatus.BAD_REQUEST


def test_expiration_header_and_expired_upload_is_gone(user_client: APIClient) -> None:
    created = create(user_client, 8, b"abcd")
    location = created["Location"]
    head = user_client.head(location, headers=TUS)
    expires = parse_http_date(head["Upload-Expires"])
    hours = float(settings.UPLOAD_EXPIRY_HOURS)
    assert abs(expires - (timezone.now().timestamp() + hours * 3600)) < 5
    with time_machine.travel(timezone.now() + dt.timedelta(hours=hours, seconds=5)):
        assert user_client.head(location, headers=TUS).status_code == HTTPStatus.NOT_FOUND
        assert patch(user_client, location, 4, b"efgh").status_code == HTTPStatus.NOT_FOUND


def test_termination(user_client: APIClient, django_capture_on_commit_callbacks: Any) -> None:
    created = create(user_client, 8, b"abcd")
    upload = ResumableUpload.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        response = send(user_client, "DELETE", created["Location"], headers=TUS)
    assert response.status_code == HTTPStatus.NO_CONTENT
    assert response["Tus-Resumable"] == "1.0.0"
    assert user_client.head(created["Location"], headers=TUS).status_code == HTTPStatus.NOT_FOUND
    assert not store.local_path(upload.storage_key).exists()
