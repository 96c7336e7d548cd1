"""One NUL check (`apps.core.validation.contains_nul`) and every entry point that refuses NUL
with its SPEC code, at service level (PostgreSQL cannot store NUL; SQLite would, so the
refusal must come from the code, the same on both)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from apps.core.archives import member_problem
from apps.core.exceptions import InvalidRequest, NotFound
from apps.core.validation import NUL_MESSAGE, contains_nul
from apps.jobs.selectors import job_get
from apps.jobs.services import job_config_cost
from apps.review.services.review import review_complete
from apps.schedule.booking import life_spec_build
from apps.schedule.exceptions import InvalidSchedule, UnknownTopic
from apps.schedule.task_runs import topic_call_check
from apps.submissions.exceptions import InvalidFilename
from apps.submissions.models import SubmissionStatus
from apps.submissions.services.drafts import submission_create
from apps.submissions.services.transitions import submission_seal_ready
from apps.submissions.validation import validate_filename
from tests.factories.submissions import make_stored_submission
from tests.factories.users import make_user


@pytest.mark.parametrize(
    ("value", "found"),
    [
        ("plain", False),
        ("a\x00b", True),
        ({"k": "v"}, False),
        ({"k\x00": "v"}, True),
        ({"k": ["ok", {"deep": "x\x00"}]}, True),
        (("a", "b\x00"), True),
        (12, False),
        (None, False),
    ],
)
def test_contains_nul_looks_through_nested_data(value: Any, found: bool) -> None:
    assert contains_nul(value) is found


def test_job_config_with_nul_is_an_invalid_request() -> None:
    with pytest.raises(InvalidRequest) as caught:
        job_config_cost(config={"resource_class": "small", "args": ["x\x00"]})

    assert caught.value.code == "invalid_request"


@pytest.mark.django_db
def test_submission_metadata_with_nul_is_an_invalid_request(user: User) -> None:
    with pytest.raises(InvalidRequest) as caught:
        submission_create(user=user, uploads=[], metadata={"note": "a\x00"})

    assert caught.value.code == "invalid_request"
    assert caught.value.extra["fields"]["metadata"] == [NUL_MESSAGE]


def test_a_file_name_with_nul_is_an_invalid_filename() -> None:
    with pytest.raises(InvalidFilename) as caught:
        validate_filename("main\x00.py")

    assert caught.value.code == "invalid_filename"


@pytest.mark.django_db
def test_ids_with_nul_are_not_found(user: User) -> None:
    with pytest.raises(NotFound):
        job_get(job_id="ab\x00cd", user=user)
    assert submission_seal_ready(submission_id="ab\x00cd", user_id=user.pk) is False


@pytest.mark.django_db
def test_a_review_comment_with_nul_is_an_invalid_request(user: User) -> None:
    reviewer = make_user(username="rita", reviewer=True)
    submission = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)

    with pytest.raises(InvalidRequest) as caught:
        review_complete(
            user=reviewer, submission_id=submission.pk, verdict="approve", comment="x\x00"
        )

    assert caught.value.code == "invalid_request"
    assert "comment" in caught.value.extra["fields"]


def test_a_schedule_action_with_nul_is_an_invalid_schedule() -> None:
    with pytest.raises(InvalidSchedule) as caught:
        life_spec_build(
            {
                "schedule_type": "point",
                "birth_time": "2099-01-01 00:00:00",
                "birth_action": {"path": "/api/me/", "method": "POST", "body": {"k": "\x00"}},
            }
        )

    assert caught.value.code == "invalid_schedule"


@pytest.mark.django_db
def test_a_task_content_with_nul_is_refused(user: User) -> None:
    staff = make_user(username="sam", is_staff=True)

    with pytest.raises(UnknownTopic) as caught:
        topic_call_check(user=staff, topic="quota.boost", content={"concurrent": 1, "note": "\x00"})

    assert caught.value.extra["fields"]["content"] == [NUL_MESSAGE]


def test_an_archive_member_with_nul_is_unsafe() -> None:
    assert member_problem("ok/name.py") is None
    assert member_problem("evil\x00.py") == "a member name with NUL"


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/me/", "/api/leaderboard/", "/accounts/login/"])
def test_a_session_cookie_unquoted_into_a_nul_is_no_session(path: str) -> None:
    # `"...\000..."` is plain ASCII on the wire (gunicorn lets it through); Django unquotes it
    # into a NUL, which PostgreSQL refused in the session lookup: a 500 on every request.
    client = Client(raise_request_exception=False)
    response = client.get(path, HTTP_COOKIE='sessionid="abcdefgh\\000ijkl"')
    assert response.status_code < HTTPStatus.INTERNAL_SERVER_ERROR, response.content
    if path == "/api/me/":
        assert response.status_code == HTTPStatus.UNAUTHORIZED
        assert response.json()["code"] == "not_authenticated"


@pytest.mark.django_db
def test_a_real_session_still_signs_the_user_in(user: User) -> None:
    client = Client()
    client.force_login(user)
    assert client.get("/api/me/").status_code == HTTPStatus.OK


@pytest.mark.django_db
def test_a_bearer_token_with_nul_is_an_authentication_failure() -> None:
    client = Client(raise_request_exception=False)
    response = client.get("/api/me/", HTTP_AUTHORIZATION="Bearer abc\x00def")
    assert response.status_code == HTTPStatus.UNAUTHORIZED, response.content
    assert response.json()["code"] == "authentication_failed"
