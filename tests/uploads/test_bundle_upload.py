"""A bundle that arrived as a resumable upload is applied by its id (`POST /api/challenges/`
`{"upload_id"}`), bounded by MAX_BUNDLE_SIZE, and consumed once applied."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.benchmarks.models import Challenge
from apps.submissions.models import ResumableUpload
from apps.submissions.resumable import store
from tests.benchmarks.bundles import bundle, grant_add_challenge
from tests.uploads.requests import send

pytestmark = pytest.mark.django_db

V8 = {"Upload-Draft-Interop-Version": "8"}


@pytest.fixture
def host_client(user: User, client_for: Any) -> APIClient:
    grant_add_challenge(user)
    return client_for(user)  # type: ignore[no-any-return]


def upload(client: APIClient, data: bytes, *, complete: bool = True) -> str:
    response = send(
        client,
        "POST",
        "/api/uploads/",
        data,
        headers={"Upload-Complete": "?1" if complete else "?0", **V8},
    )
    assert response.status_code == HTTPStatus.CREATED
    return str(response.json()["upload_id"])


def apply(client: APIClient, upload_id: str, **extra: Any) -> Any:
    return client.post("/api/challenges/", {"upload_id": upload_id, **extra}, format="json")


def test_bundle_applied_from_an_upload_then_consumed(
    host_client: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    upload_id = upload(host_client, bundle())
    planned = apply(host_client, upload_id, dry_run=True)
    assert planned.status_code == HTTPStatus.OK
    assert planned.json()["dry_run"] is True
    assert ResumableUpload.objects.get().attached_at is None
    key = ResumableUpload.objects.get().storage_key
    with django_capture_on_commit_callbacks(execute=True):
        created = apply(host_client, upload_id)
    assert created.status_code == HTTPStatus.CREATED
    assert Challenge.objects.filter(slug=created.json()["slug"]).exists()
    assert ResumableUpload.objects.get().attached_at is not None
    assert not store.local_path(key).exists()
    again = apply(host_client, upload_id)
    assert again.status_code == HTTPStatus.CONFLICT
    assert again.json()["code"] == "upload_attached"


def test_unfinished_upload_is_409(host_client: APIClient) -> None:
    response = apply(host_client, upload(host_client, bundle()[:100], complete=False))
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "upload_incomplete"


def test_bundle_size_is_bounded_whichever_way_it_arrives(
    host_client: APIClient, settings: Any
) -> None:
    data = bundle()
    settings.MAX_BUNDLE_SIZE = len(data) - 1
    response = apply(host_client, upload(host_client, data))
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_bundle"
    assert "upload_id" in response.json()["fields"]


def test_another_users_upload_is_404(host_client: APIClient, other_client: APIClient) -> None:
    response = apply(host_client, upload(other_client, bundle()))
    assert response.status_code == HTTPStatus.NOT_FOUND
