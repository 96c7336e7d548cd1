"""The one API idiom: strict query parameters, path ids checked by the URL, nested validation
errors, the reviewer permission named in one place and asked by every reviewer view."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from apps.core.handlers import validation_fields, validation_message
from apps.review.services import review_claim
from apps.submissions.models import SubmissionStatus
from tests.factories.submissions import make_stored_submission, make_submission
from tests.factories.users import make_user
from tests.schedule.conftest import point_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_of(user: User) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


@pytest.mark.parametrize(
    "query",
    [
        "/api/jobs/?status=",
        "/api/jobs/?status=nope",
        "/api/jobs/?status=queued&status=running",
        "/api/submissions/?limit=abc",
        "/api/submissions/?limit=false",
        "/api/submissions/?limit=0",
        "/api/submissions/?limit=101",
        "/api/submissions/?offset=-1",
        "/api/leaderboard/?limit=",
    ],
)
def test_a_bad_query_parameter_is_a_400_with_fields(client_of: APIClient, query: str) -> None:
    response = client_of.get(query)
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    body = response.json()
    assert body["code"] == "invalid_request"
    name = query.split("?")[1].split("=")[0]
    assert list(body["fields"]) == [name]


def test_good_query_parameters_are_accepted(client_of: APIClient) -> None:
    assert client_of.get("/api/jobs/?status=queued").status_code == HTTPStatus.OK
    page = client_of.get("/api/submissions/?limit=1&offset=0")
    assert page.status_code == HTTPStatus.OK
    assert page.json() == {"count": 0, "next": None, "previous": None, "results": []}


@pytest.mark.parametrize(
    "path",
    [
        "/api/jobs/ABC/",
        "/api/jobs/" + "0" * 31 + "/",
        "/api/jobs/" + "0" * 31 + "%00/",
        "/api/submissions/" + "g" * 32 + "/",
        "/api/quotas/reservations/xyz/release/",
        "/api/review/submissions/x/claim/",
        "/api/schedules/not-a-uuid/",
    ],
)
def test_a_malformed_id_is_an_unknown_path(client_of: APIClient, path: str) -> None:
    response = client_of.get(path) if "release" not in path else client_of.post(path)
    assert response.status_code == HTTPStatus.NOT_FOUND
    assert response.json()["code"] == "not_found"


def test_a_life_uuid_in_any_accepted_spelling_reaches_the_same_life(
    client_of: APIClient,
) -> None:
    created = client_of.post(
        "/api/schedules/",
        {
            "life_uuid": "0123456789ABCDEF0123456789abcdef",
            "schedule_type": "point",
            "term": {"birth_time": "2999-01-01 00:00:00"},
            "birth": {"path": "/api/me/", "method": "get"},
        },
        format="json",
    )
    assert created.status_code == HTTPStatus.CREATED, created.content
    assert created.json()["life_uuid"] == "0123456789abcdef0123456789abcdef"
    assert created.json()["birth_action"]["method"] == "GET"
    for spelling in ("0123456789abcdef0123456789abcdef", "01234567-89AB-CDEF-0123-456789ABCDEF"):
        response = client_of.get(f"/api/schedules/{spelling}/")
        assert response.status_code == HTTPStatus.OK
        assert response.json()["life_uuid"] == "0123456789abcdef0123456789abcdef"


def test_nested_errors_keep_their_shape() -> None:
    fields = validation_fields(
        {"birth": {"method": ["bad"]}, "files": [{}, {"name": ["x"]}], "n": ["must"]}
    )
    assert fields == {"birth": {"method": ["bad"]}, "files": [{}, {"name": ["x"]}], "n": ["must"]}
    assert validation_message(fields) == "birth.method: bad; files[1].name: x; n: must"


# Where the permission may be named: its one home, and the model that declares it.
_NAMES_THE_PERMISSION = {"apps/core/permissions.py", "apps/review/models.py"}
_ASKS_THE_PERMISSION = {"apps/core/permissions.py"}


def _product_sources() -> Iterator[tuple[str, str]]:
    base = Path(settings.BASE_DIR)
    for folder, pattern in (("apps", "*.py"), ("config", "*.py"), ("templates", "*.html")):
        for path in sorted((base / folder).rglob(pattern)):
            if "migrations" not in path.parts:
                yield path.relative_to(base).as_posix(), path.read_text(encoding="utf-8")


def test_the_reviewer_permission_is_asked_in_one_place() -> None:
    named, asked = set(), set()
    for name, text in _product_sources():
        if "can_review" in text or "perms.review" in text:
            named.add(name)
        if re.search(r"\bhas_perms?\b", text):
            asked.add(name)

    assert named == _NAMES_THE_PERMISSION, "only apps.core.permissions names the permission"
    assert asked == _ASKS_THE_PERMISSION, "only user_is_reviewer asks a user's permissions"


# Every URL under these prefixes is for reviewers, except those named here with their role.
_REVIEWER_ROUTES = ("api/review/", "review/")
_OTHER_ROLE = {"review-regrade": "staff"}


def _routes(
    patterns: list[URLPattern | URLResolver], prefix: str = ""
) -> Iterator[tuple[str, URLPattern]]:
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, route)
        else:
            yield route, pattern


def _reviewer_urls(values: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(url name, method, path) of every handler of every reviewer-only URL pattern."""
    for route, pattern in _routes(get_resolver().url_patterns):
        if not route.startswith(_REVIEWER_ROUTES):
            continue
        assert pattern.name, f"{route}: every reviewer URL has a name"
        view = getattr(pattern.callback, "view_class", None)
        methods = [m for m in ("get", "post", "put", "patch", "delete") if hasattr(view, m)]
        assert methods, f"{route}: no handler found"
        needed = getattr(pattern.pattern, "converters", {})
        assert set(needed) <= set(values), f"{route}: the walk cannot fill {set(needed)}"
        path = reverse(pattern.name, kwargs={key: values[key] for key in needed})
        for method in methods:
            yield pattern.name, method, path


def test_every_reviewer_url_refuses_a_plain_user_and_lets_a_reviewer_through(
    user: User,
) -> None:
    waiting = make_stored_submission(
        user, status=SubmissionStatus.REVIEW_PENDING, program="print(1)"
    )
    values = {"submission_id": waiting.pk, "file_id": waiting.files.order_by("pk")[0].pk}
    role_holders = {
        "reviewer": make_user(username="walker", reviewer=True),
        "staff": make_user(username="walker-staff", is_staff=True),
    }
    plain = APIClient()
    plain.force_login(make_user(username="plain"))
    walked, failures = set(), []
    for name, method, path in _reviewer_urls(values):
        walked.add(name)
        refused = getattr(plain, method)(path)
        body = refused.json() if path.startswith("/api/") else {"code": "permission_denied"}
        if (refused.status_code, body.get("code")) != (HTTPStatus.FORBIDDEN, "permission_denied"):
            failures.append(f"plain user {method.upper()} {path}: {refused.status_code}")
        allowed = APIClient()
        allowed.force_login(role_holders[_OTHER_ROLE.get(name, "reviewer")])
        answered = getattr(allowed, method)(path)
        if answered.streaming:
            b"".join(answered.streaming_content)  # read to its end: the client closes the file
        if answered.status_code in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN):
            failures.append(f"role holder {method.upper()} {path}: {answered.status_code}")

    assert failures == []
    assert walked >= {
        "review",
        "review-queue",
        "review-detail",
        "review-file-download",
        "review-claim",
        "review-extend",
        "review-release",
        "review-complete",
        "review-regrade",
    }
    assert set(_OTHER_ROLE) <= walked


def test_staff_who_are_no_reviewers_may_release_a_claim_and_nothing_else(
    user: User, reviewer: User
) -> None:
    waiting = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    review_claim(user=reviewer, submission_id=waiting.pk)
    staff = APIClient()
    staff.force_login(make_user(username="ops", is_staff=True))
    url = f"/api/review/submissions/{waiting.pk}/"

    assert staff.post(url + "claim/").json()["code"] == "permission_denied"
    released = staff.post(url + "release/")

    assert released.status_code == HTTPStatus.OK, released.content
    assert released.json() == {"submission_id": waiting.pk, "released": True}


def test_the_review_page_and_api_agree_on_who_reviews(user: User) -> None:
    reviewer = make_user(username="pagereviewer", reviewer=True)
    plain, allowed = Client(), Client()
    plain.force_login(user)
    allowed.force_login(reviewer)
    assert plain.get("/review/").status_code == HTTPStatus.FORBIDDEN
    assert allowed.get("/review/").status_code == HTTPStatus.OK
    assert plain.get("/api/review/queue/").status_code == HTTPStatus.FORBIDDEN
    assert plain.get("/api/review/queue/").json()["code"] == "permission_denied"
    assert allowed.get("/api/review/queue/").status_code == HTTPStatus.OK
    assert b'href="/review/"' in allowed.get("/jobs/").content
    assert b'href="/review/"' not in plain.get("/jobs/").content


def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/jobs/", _nested(5000)),  # the decoder's own recursion limit
        ("/api/jobs/", "[" * 100_000 + "]" * 100_000),
        ("/api/jobs/", '{"submission_id": "x", "config": ' + _nested(900) + "}"),
        (
            "/api/schedules/",
            '{"schedule_type": "one_time", "birth": {"body": ' + _nested(5000) + "}}",
        ),
    ],
)
def test_a_deeply_nested_json_body_is_a_400_never_a_500(
    client_of: APIClient, path: str, body: str
) -> None:
    response = client_of.post(path, body, content_type="application/json")
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert response.json()["code"] == "invalid_request"
    assert "nested deeper than 64 levels" in response.json()["error"]


def test_json_nested_within_the_bound_is_validated_as_usual(client_of: APIClient) -> None:
    config = _nested(60)
    response = client_of.post(
        "/api/jobs/",
        '{"submission_id": "x", "config": ' + config + "}",
        content_type="application/json",
    )
    assert response.status_code == HTTPStatus.NOT_FOUND, response.content


@pytest.mark.parametrize(
    "body",
    [
        '{"submission_id": "%s", "config": {"note": "\\ud800"}}',
        '{"submission_id": "%s", "config": {"\\udfff": 1}}',
        '{"submission_id": "%s", "config": {"list": ["a\\udc00b"]}}',
    ],
)
def test_a_lone_surrogate_in_a_job_config_is_refused_and_never_stored(
    client_of: APIClient, user: User, body: str
) -> None:
    # Stored, it made every later listing of the user's jobs a 500 (UTF-8 cannot encode it).
    submission = make_submission(owner=user)
    response = client_of.post("/api/jobs/", body % submission.pk, content_type="application/json")
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert response.json()["code"] == "invalid_request"
    assert "surrogate" in response.json()["error"]
    assert client_of.get("/api/jobs/").json() == []


def test_a_lone_surrogate_in_a_webhook_body_books_nothing(client_of: APIClient) -> None:
    body = point_body()
    body["birth"]["body"] = {"x": "SURROGATE"}
    raw = json.dumps(body).replace("SURROGATE", "\\ud800")
    response = client_of.post("/api/schedules/", raw, content_type="application/json")
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert client_of.get("/api/schedules/").json() == []


def test_a_surrogate_pair_escape_is_a_character_and_accepted(
    client_of: APIClient, user: User
) -> None:
    submission = make_submission(owner=user)
    body = '{"submission_id": "SUB", "config": {"note": "\\ud83d\\ude00"}}'.replace(
        "SUB", submission.pk
    )
    response = client_of.post("/api/jobs/", body, content_type="application/json")
    assert response.status_code == HTTPStatus.CREATED, response.content
    assert client_of.get("/api/jobs/").json()[0]["config"]["note"] == "\U0001f600"


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("get", "/api/submissions/?offset=9223372036854775808", None, "offset"),
        ("get", "/api/submissions/?limit=-9223372036854775809", None, "limit"),
        ("get", "/api/leaderboard/?limit=1e400", None, "limit"),
        ("post", "/api/jobs/", {"submission_id": "x", "idempotency_ttl_hours": 2**64}, None),
        ("post", "/api/quotas/reservations/", {"ttl_seconds": 2**64}, "ttl_seconds"),
        ("post", "/api/quotas/reservations/", {"ttl_seconds": -(2**64)}, "ttl_seconds"),
        ("post", "/api/quotas/reservations/", {"ttl_seconds": 1e308}, "ttl_seconds"),
    ],
)
def test_a_value_past_a_database_integer_is_a_400_never_a_503_or_500(
    client_of: APIClient, method: str, path: str, body: Any, field: str | None
) -> None:
    # An integer the database cannot hold would raise OverflowError / DataError (a 500) or an
    # OperationalError (mapped to 503 service_unavailable): bounds refuse it first.
    send = client_of.get if method == "get" else client_of.post
    response = send(path, body, format="json") if body else send(path)
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert response.json()["code"] == "invalid_request"
    name = field or "idempotency_ttl_hours"
    assert name in response.json()["fields"]


def test_a_huge_integer_inside_a_job_config_is_stored_as_json(
    client_of: APIClient, user: User
) -> None:
    submission = make_submission(owner=user)
    body = {"submission_id": submission.pk, "config": {"seed": 2**70, "neg": -(2**70)}}
    response = client_of.post("/api/jobs/", body, format="json")
    assert response.status_code == HTTPStatus.CREATED, response.content
    assert client_of.get("/api/jobs/").json()[0]["config"]["seed"] == 2**70
