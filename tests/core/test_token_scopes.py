"""Token scopes, played by the holder of a narrow token who tries every door: the view itself,
a staff-only task topic, a Life or a header booking whose call would later run without the
token. Every API view declares or derives a scope (deny by default)."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient
from rest_framework.views import APIView

from apps.core.api.base import ApiView, PublicApiView
from apps.core.scopes import ALL_SCOPES
from apps.review.api.views import SubmissionRegradeApi
from apps.schedule.models import Life, TaskRun
from apps.submissions.models import SubmissionStatus
from tests.factories.submissions import make_stored_submission, make_submission
from tests.factories.tokens import make_token
from tests.schedule.conftest import at

pytestmark = pytest.mark.django_db
TASKS = "/api/schedule/tasks/"
BOOST = {"topic": "quota.boost", "content": {"concurrent": 2}}
RESTORE = {"topic": "quota.restore", "content": {"concurrent": 2}}


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def assert_insufficient(response: Any) -> None:
    assert response.status_code == HTTPStatus.FORBIDDEN, response.content
    assert response.json()["code"] == "insufficient_scope"


def test_a_read_token_cannot_post_a_job(user: User) -> None:
    submission = make_submission(owner=user)
    client = bearer(make_token(user, scopes=["read"]))
    assert client.get("/api/jobs/").status_code == HTTPStatus.OK
    assert_insufficient(client.post("/api/jobs/", {"submission_id": submission.pk}, format="json"))
    submission.refresh_from_db()
    assert submission.status == SubmissionStatus.DRAFT


def test_a_submit_token_without_read_cannot_list(user: User) -> None:
    client = bearer(make_token(user, scopes=["submit"]))
    assert_insufficient(client.get("/api/jobs/"))
    assert_insufficient(client.get("/api/tokens/"))


def test_a_staff_users_submit_read_token_cannot_boost_the_quota(staff_user: User) -> None:
    narrow = bearer(make_token(staff_user, scopes=["submit", "read"]))
    assert_insufficient(narrow.post(TASKS, BOOST, format="json"))
    # Hidden in a Life (as JSON or as text) or in a header booking: the same answer.
    term: dict[str, Any] = {
        "schedule_type": "term",
        "term": {"birth_time": at(60), "death_time": at(120)},
        "birth": {"path": TASKS, "method": "POST", "body": BOOST},
        "death": {"path": TASKS, "method": "POST", "body": RESTORE},
    }
    assert_insufficient(narrow.post("/api/schedules/", term, format="json"))
    as_text = {**term, "birth": {**term["birth"], "body": json.dumps(BOOST)}}
    assert_insufficient(narrow.post("/api/schedules/", as_text, format="json"))
    header = narrow.post(TASKS, BOOST, format="json", HTTP_X_SCHEDULE_DATETIME=at(10))
    assert_insufficient(header)
    assert Life.objects.count() == 0
    assert TaskRun.objects.count() == 0
    # With `admin` the same staff user books it.
    admin = bearer(make_token(staff_user, scopes=["submit", "read", "admin"]))
    assert admin.post("/api/schedules/", term, format="json").status_code == HTTPStatus.CREATED


def test_a_life_cannot_be_patched_into_a_call_the_token_could_not_make(staff_user: User) -> None:
    narrow = bearer(make_token(staff_user, scopes=["submit", "read"]))
    point = {
        "schedule_type": "point",
        "term": {"birth_time": at(60)},
        "birth": {"path": "/api/me/", "method": "GET"},
    }
    life = narrow.post("/api/schedules/", point, format="json").json()
    change = {"birth": {"path": f"/api/review/submissions/{'0' * 32}/claim/", "method": "POST"}}
    assert_insufficient(narrow.patch(f"/api/schedules/{life['life_uuid']}/", change, format="json"))


def test_a_header_booking_needs_the_scope_of_the_booked_call(user: User) -> None:
    submission = make_submission(owner=user)
    read_only = bearer(make_token(user, scopes=["read"]))
    booking = read_only.post(
        "/api/jobs/",
        {"submission_id": submission.pk},
        format="json",
        HTTP_X_SCHEDULE_DATETIME=at(10),
    )
    assert_insufficient(booking)
    assert Life.objects.count() == 0


def test_a_reviewers_token_without_review_cannot_claim(user: User, reviewer: User) -> None:
    submission = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    narrow = bearer(make_token(reviewer, scopes=["read", "submit"]))
    assert_insufficient(narrow.post(f"/api/review/submissions/{submission.pk}/claim/"))
    assert_insufficient(narrow.get("/api/review/queue/"))
    full = bearer(make_token(reviewer, scopes=["review"]))
    assert full.post(f"/api/review/submissions/{submission.pk}/claim/").status_code == 200


def test_a_staff_token_without_admin_cannot_regrade(user: User, staff_user: User) -> None:
    submission = make_stored_submission(user, status=SubmissionStatus.COMPLETED)
    narrow = bearer(make_token(staff_user, scopes=["read", "submit", "review"]))
    assert_insufficient(narrow.post(f"/api/review/submissions/{submission.pk}/regrade/"))


def test_a_scope_never_grants_more_than_the_user_has(user: User) -> None:
    # alice cannot hold `admin`; had an old migration given it, it would still grant nothing.
    from apps.core.models import ApiToken

    token = make_token(user)
    ApiToken.objects.filter(user=user).update(scopes="read submit review host admin")
    response = bearer(token).post(TASKS, BOOST, format="json")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["code"] == "permission_denied"


def test_a_session_is_not_limited_by_scopes(staff_user: User) -> None:
    client = APIClient()
    client.force_login(staff_user)
    response = client.post(TASKS, BOOST, format="json")
    assert response.status_code in (HTTPStatus.OK, HTTPStatus.ACCEPTED)


def _api_views(patterns: list[URLPattern | URLResolver], prefix: str = "") -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            found.extend(_api_views(pattern.url_patterns, route))
        elif route.startswith("api/"):
            view = getattr(pattern.callback, "view_class", None) or getattr(
                pattern.callback, "cls", None
            )
            found.append((route, view))
    return found


# Open documentation views of drf-spectacular: no authentication at all, so no token reaches them.
UNAUTHENTICATED = {"SpectacularAPIView", "SpectacularSwaggerView"}


def test_every_api_view_declares_or_derives_a_scope_for_every_method() -> None:
    views = _api_views(get_resolver().url_patterns)
    assert len(views) > 20
    for route, view in views:
        assert view is not None, route
        assert issubclass(view, APIView), route
        if view.__name__ in UNAUTHENTICATED:
            assert not view().get_authenticators(), route
            continue
        assert issubclass(view, ApiView), f"{route}: {view.__name__} is not an ApiView"
        for method in view().allowed_methods:
            scope = view.scope_for(method)
            if method in getattr(view, "public_methods", ()):
                assert scope is None, (route, method)  # declared public, by name
            elif issubclass(view, PublicApiView):
                assert scope is None, route
            else:
                assert scope in ALL_SCOPES, (route, method, scope)


def test_staff_only_views_need_admin() -> None:
    assert SubmissionRegradeApi.scope_for("POST") == "admin"
