"""The questions that have a leaderboard: discovery for a newcomer, and nothing more than the
leaderboard itself shows."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.submissions.models import SubmissionStatus
from tests.factories.submissions import make_graded_submission
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db


def test_lists_each_ranked_question_with_its_skills_users_and_best_score(
    api_client: APIClient, user: User, other_user: User, django_assert_num_queries: Any
) -> None:
    make_graded_submission(user, score=0.5, question_id="q1", skill="en")
    make_graded_submission(user, score=0.7, question_id="q1", skill="en")
    make_graded_submission(other_user, score=0.9, question_id="q1", skill="ja")
    make_graded_submission(other_user, score=0.2, question_id="q2")
    make_graded_submission(user, score=1.0, question_id="")

    with django_assert_num_queries(2):
        response = api_client.get("/api/leaderboard/questions/")

    assert response.status_code == HTTPStatus.OK
    assert response.json() == [
        {"question_id": "", "skills": [""], "users": 1, "best_score": 1.0},
        {"question_id": "q1", "skills": ["en", "ja"], "users": 2, "best_score": 0.9},
        {"question_id": "q2", "skills": [""], "users": 1, "best_score": 0.2},
    ]


def test_a_question_seen_only_on_drafts_failures_or_pending_reviews_is_not_listed(
    api_client: APIClient, user: User
) -> None:
    """An attacker reading the public list learns no question id that the leaderboard does not
    already show: another user's draft, failed or unreviewed submission stays private."""
    victim = make_user(username="victim")
    make_graded_submission(victim, score=None, question_id="secret-draft", status="draft")
    make_graded_submission(
        victim, score=0.3, question_id="secret-failed", status=SubmissionStatus.FAILED
    )
    make_graded_submission(
        victim, score=0.8, question_id="secret-review", status=SubmissionStatus.REVIEW_PENDING
    )
    make_graded_submission(user, score=0.4, question_id="public-q")

    response = api_client.get("/api/leaderboard/questions/")

    assert response.status_code == HTTPStatus.OK
    assert [q["question_id"] for q in response.json()] == ["public-q"]
    assert "secret" not in response.content.decode()


def test_follows_leaderboard_public_and_refuses_a_bad_limit(
    settings: Any,
    api_client: APIClient,
    user: User,
    client_for: Callable[[User], APIClient],
) -> None:
    make_graded_submission(user, score=0.4, question_id="q")
    bad = api_client.get("/api/leaderboard/questions/", {"limit": "0"})
    assert bad.status_code == HTTPStatus.BAD_REQUEST
    assert bad.json()["code"] == "invalid_request"
    assert list(bad.json()["fields"]) == ["limit"]

    settings.LEADERBOARD_PUBLIC = False
    anonymous = api_client.get("/api/leaderboard/questions/")
    assert anonymous.status_code == HTTPStatus.UNAUTHORIZED
    assert anonymous.json()["code"] == "not_authenticated"
    assert client_for(user).get("/api/leaderboard/questions/").json()[0]["question_id"] == "q"
