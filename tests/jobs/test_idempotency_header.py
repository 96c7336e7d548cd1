"""The attacker (or a confused proxy) sends two Idempotency-Key header lines, or a key with a
comma; refused idempotency keys point at the docs; a key in use says when to retry."""

from __future__ import annotations

import datetime as dt
import http.client
import json
from collections.abc import Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone

from apps.jobs.models import IdempotencyKey, Job
from apps.jobs.services import idempotency_fingerprint
from apps.submissions.models import Submission
from tests.factories.submissions import make_submission
from tests.factories.tokens import make_token

pytestmark = pytest.mark.django_db

Submit = Callable[..., Any]
DESCRIBED_BY = '</api/docs/>; rel="describedby"'


def _raw_submit(base_url: str, token: str, body: dict[str, Any], keys: list[str]) -> Any:
    """POST /api/jobs/ over a real socket, one `Idempotency-Key` header line per key (the test
    client cannot send a header twice)."""
    address = urlsplit(base_url)
    payload = json.dumps(body).encode()
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=30)
    try:
        connection.putrequest("POST", "/api/jobs/")
        connection.putheader("Authorization", f"Bearer {token}")
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(len(payload)))
        for key in keys:
            connection.putheader("Idempotency-Key", key)
        connection.endheaders(payload)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), json.loads(response.read())
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_two_header_lines_are_refused_not_joined_into_one_key(user: User, live_server: Any) -> None:
    token = make_token(user)
    first, second = make_submission(owner=user), make_submission(owner=user)

    status, headers, body = _raw_submit(
        live_server.url, token, {"submission_id": first.pk}, ["k1", "k2"]
    )
    assert status == HTTPStatus.BAD_REQUEST, body
    assert body["code"] == "invalid_idempotency_key"
    assert headers["Link"] == DESCRIBED_BY
    assert not Job.objects.exists()
    assert not IdempotencyKey.objects.exists()

    # The same server takes one header line (so the refusal above is about the two lines).
    status, _, body = _raw_submit(live_server.url, token, {"submission_id": second.pk}, ["k1"])
    assert status == HTTPStatus.CREATED, body
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["k1"]


@pytest.mark.parametrize("where", ["header", "body"])
def test_a_key_with_a_comma_is_refused(
    submit: Submit, ready_submission: Submission, where: str
) -> None:
    body: dict[str, Any] = {"submission_id": ready_submission.pk}
    headers: dict[str, str] = {}
    if where == "header":
        headers["Idempotency-Key"] = "k1,k2"
    else:
        body["idempotency_key"] = "k1,k2"
    response = submit(body, **headers)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_idempotency_key"
    assert "comma" in response.json()["error"]
    assert response.headers["Link"] == DESCRIBED_BY
    assert not Job.objects.exists()


def test_every_400_and_422_idempotency_refusal_links_to_the_docs(
    submit: Submit, ready_submission: Submission
) -> None:
    body = {"submission_id": ready_submission.pk, "idempotency_key": "a"}
    malformed = submit({**body, "idempotency_key": "has space"})
    mismatch = submit(body, **{"Idempotency-Key": "b"})
    assert submit(body).status_code == HTTPStatus.CREATED
    reused = submit({**body, "config": {"resource_class": "small"}})
    for response, status, code in [
        (malformed, HTTPStatus.BAD_REQUEST, "invalid_idempotency_key"),
        (mismatch, HTTPStatus.BAD_REQUEST, "idempotency_key_mismatch"),
        (reused, HTTPStatus.UNPROCESSABLE_ENTITY, "idempotency_key_reused"),
    ]:
        assert (response.status_code, response.json()["code"]) == (status, code)
        assert response.headers["Link"] == DESCRIBED_BY
    # Not on answers that are not about the key.
    assert "Link" not in submit({"submission_id": "0" * 32}).headers


def test_a_key_in_use_answers_409_with_retry_after(
    submit: Submit, user: User, settings: Any
) -> None:
    settings.IDEMPOTENCY_LOCK_TIMEOUT = 60
    start = timezone.now()
    body = {"submission_id": make_submission(owner=user).pk, "idempotency_key": "busy"}
    IdempotencyKey.objects.create(
        user=user,
        key="busy",
        fingerprint=idempotency_fingerprint(
            submission_id=body["submission_id"], config={}, reservation_id=None
        ),
        lock_token="d" * 32,
        locked_at=start,
        created_at=start,
        expires_at=start + dt.timedelta(hours=24),
    )
    expected = [(1, 2), (30, 2), (59, 1)]  # (seconds after the claim, Retry-After)
    for elapsed, retry_after in expected:
        with time_machine.travel(start + dt.timedelta(seconds=elapsed), tick=False):
            response = submit(body)
        assert response.status_code == HTTPStatus.CONFLICT
        assert response.json()["code"] == "idempotency_request_in_progress"
        assert response.headers["Retry-After"] == str(retry_after)
        assert response.json()["retry_after"] == retry_after

    settings.IDEMPOTENCY_LOCK_TIMEOUT = 300  # a longer lock polls less often
    with time_machine.travel(start + dt.timedelta(seconds=1), tick=False):
        assert submit(body).headers["Retry-After"] == "10"
