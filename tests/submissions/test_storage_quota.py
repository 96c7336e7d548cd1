"""Per-user storage (QUOTA_MAX_STORAGE_BYTES) and the byte bound of one create request
(MAX_SUBMISSION_REQUEST_SIZE): the attacker fills the disk in one request, file by file, by
lying about Content-Length, or by racing uploads. SQLite and PostgreSQL."""

from __future__ import annotations

import http.client
from collections import Counter
from collections.abc import Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.quotas.models import QuotaPolicy
from apps.submissions.models import Submission, SubmissionFile
from apps.submissions.services.storage import submission_draft_delete
from tests.concurrency import run_concurrently
from tests.factories.tokens import make_token
from tests.submissions.conftest import add_file, create_submission

pytestmark = pytest.mark.django_db

StoredNames = Callable[[], list[str]]


def _stored_bytes(user: User) -> int:
    return sum(SubmissionFile.objects.filter(submission__owner=user).values_list("size", flat=True))


def _assert_storage_refused(response: Any) -> None:
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS, response.content
    assert response.json()["code"] == "storage_quota_exceeded"


def test_quota_me_shows_stored_bytes_and_the_limit(user_client: APIClient, settings: Any) -> None:
    assert create_submission(user_client, [("main.py", b"x" * 12)]).status_code == 201
    body = user_client.get("/api/quotas/me/").json()
    assert body["storage_bytes"] == 12
    assert body["max_storage_bytes"] == settings.QUOTA_MAX_STORAGE_BYTES == 10 * 1024**3


def test_uploads_past_the_storage_limit_are_refused_and_leave_nothing(
    user: User, user_client: APIClient, settings: Any, stored_names: StoredNames
) -> None:
    settings.QUOTA_MAX_STORAGE_BYTES = 1000
    created = create_submission(user_client, [("main.py", b"a" * 600)])
    assert created.status_code == HTTPStatus.CREATED
    draft = created.json()["submission_id"]
    # Reaching the limit exactly is allowed.
    assert add_file(user_client, draft, "config.yaml", b"b" * 400).status_code == 201
    assert _stored_bytes(user) == 1000

    _assert_storage_refused(add_file(user_client, draft, "more.py", b"c"))
    _assert_storage_refused(create_submission(user_client, [("main.py", b"d")]))
    assert _stored_bytes(user) == 1000
    assert Submission.objects.count() == 1
    assert len(stored_names()) == 2
    assert user_client.get("/api/quotas/me/").json()["storage_bytes"] == 1000


def test_a_file_that_passes_the_remaining_storage_is_cut_off_while_streaming(
    user: User, user_client: APIClient, settings: Any, stored_names: StoredNames
) -> None:
    settings.QUOTA_MAX_STORAGE_BYTES = 1000
    response = create_submission(user_client, [("main.py", b"e" * 5000)])
    _assert_storage_refused(response)
    assert response.json()["max_storage_bytes"] == 1000
    assert not Submission.objects.exists()
    assert stored_names() == []


def test_deleting_a_draft_frees_its_bytes(
    user: User, user_client: APIClient, settings: Any
) -> None:
    settings.QUOTA_MAX_STORAGE_BYTES = 1000
    draft = create_submission(user_client, [("main.py", b"a" * 900)]).json()["submission_id"]
    _assert_storage_refused(create_submission(user_client, [("main.py", b"b" * 900)]))
    submission_draft_delete(submission_id=draft)
    assert create_submission(user_client, [("main.py", b"b" * 900)]).status_code == 201


def test_a_policy_row_overrides_the_default_limit(
    user: User, user_client: APIClient, other_client: APIClient
) -> None:
    QuotaPolicy.objects.create(user=user, max_storage_bytes=100)
    _assert_storage_refused(create_submission(user_client, [("main.py", b"a" * 101)]))
    assert create_submission(user_client, [("main.py", b"a" * 100)]).status_code == 201
    assert user_client.get("/api/quotas/me/").json()["max_storage_bytes"] == 100
    # Someone else keeps the default.
    assert create_submission(other_client, [("main.py", b"a" * 101)]).status_code == 201


def test_one_create_request_carries_at_most_max_submission_request_size(
    user: User, user_client: APIClient, settings: Any, stored_names: StoredNames
) -> None:
    settings.MAX_SUBMISSION_REQUEST_SIZE = 1000
    response = create_submission(
        user_client, [("main.py", b"a" * 600), ("config.yaml", b"b" * 600)]
    )
    assert response.status_code == HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    assert response.json()["code"] == "request_too_large"
    assert not Submission.objects.exists()
    assert stored_names() == []
    # The same files one per request are fine: the bound is per request, not per submission.
    draft = create_submission(user_client, [("main.py", b"a" * 600)]).json()["submission_id"]
    assert add_file(user_client, draft, "config.yaml", b"b" * 600).status_code == 201


def _declare_only(base_url: str, token: str, path: str, length: int) -> tuple[int, dict[str, Any]]:
    """Send only the headers of a multipart POST declaring `length` bytes, never the body: a
    server that waited for (or buffered) the body would time out here."""
    import json

    address = urlsplit(base_url)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=20)
    try:
        connection.putrequest("POST", path)
        connection.putheader("Authorization", f"Bearer {token}")
        connection.putheader("Content-Type", "multipart/form-data; boundary=x")
        connection.putheader("Content-Length", str(length))
        connection.endheaders()
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_declared_lengths_beyond_the_bounds_are_refused_before_the_body_is_read(
    user: User, user_client: APIClient, settings: Any, live_server: Any
) -> None:
    token = make_token(user)
    status, body = _declare_only(live_server.url, token, "/api/submissions/", 50 * 1024**3)
    assert (status, body["code"]) == (HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "request_too_large")

    settings.QUOTA_MAX_STORAGE_BYTES = 1024**2
    status, body = _declare_only(live_server.url, token, "/api/submissions/", 500 * 1024**2)
    assert (status, body["code"]) == (HTTPStatus.TOO_MANY_REQUESTS, "storage_quota_exceeded")

    draft = create_submission(user_client).json()["submission_id"]
    status, body = _declare_only(
        live_server.url, token, f"/api/submissions/{draft}/files/", settings.MAX_UPLOAD_FILE_SIZE
    )
    assert (status, body["code"]) == (HTTPStatus.TOO_MANY_REQUESTS, "storage_quota_exceeded")
    assert SubmissionFile.objects.count() == 1


def _codes(results: list[Any]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for outcome in results:
        assert outcome.ok, outcome.error
        response = outcome.value
        counts[
            str(response.status_code) if response.status_code < 400 else response.json()["code"]
        ] += 1
    return counts


@pytest.mark.django_db(transaction=True)
def test_racing_creates_never_pass_the_storage_limit(
    user: User, client_for: Callable[[User], APIClient], settings: Any, stored_names: StoredNames
) -> None:
    settings.QUOTA_MAX_STORAGE_BYTES = 1000
    clients = [client_for(user) for _ in range(8)]
    results = run_concurrently(
        lambda i: create_submission(clients[i], [("main.py", bytes([65 + i]) * 300)]), 8
    )
    assert _codes(results) == {"201": 3, "storage_quota_exceeded": 5}
    assert _stored_bytes(user) == 900
    assert len(stored_names()) == 3


@pytest.mark.django_db(transaction=True)
def test_racing_file_uploads_never_pass_the_storage_limit(
    user: User, client_for: Callable[[User], APIClient], settings: Any, stored_names: StoredNames
) -> None:
    settings.QUOTA_MAX_STORAGE_BYTES = 1000
    clients = [client_for(user) for _ in range(8)]
    draft = create_submission(clients[0], [("main.py", b"m" * 100)]).json()["submission_id"]
    results = run_concurrently(
        lambda i: add_file(clients[i], draft, f"part{i}.py", bytes([65 + i]) * 300), 8
    )
    assert _codes(results) == {"201": 3, "storage_quota_exceeded": 5}
    assert _stored_bytes(user) == 1000
    assert len(stored_names()) == 4


def test_session_uploads_of_the_web_page_are_bounded_too(
    user: User, settings: Any, stored_names: StoredNames
) -> None:
    """Session authentication parses the body during its CSRF check, before DRF has decided
    the user: the storage bound must still apply (and never recurse into authentication)."""
    settings.QUOTA_MAX_STORAGE_BYTES = 1000
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/submit/")
    csrf = {"X-CSRFToken": client.cookies["csrftoken"].value}
    assert create_submission(client, [("main.py", b"a" * 600)], headers=csrf).status_code == 201
    _assert_storage_refused(create_submission(client, [("main.py", b"b" * 600)], headers=csrf))
    assert len(stored_names()) == 1
