"""Leaderboard: best completed score per user, ranked, one query."""

from __future__ import annotations

import datetime as dt
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.submissions.models import SubmissionStatus
from tests.factories.submissions import make_graded_submission
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db


def test_best_score_per_user_ranked_ties_to_earlier(
    api_client: APIClient, user: User, other_user: User, django_assert_num_queries: Any
) -> None:
    carol = make_user(username="carol")
    t0 = timezone.now() - dt.timedelta(hours=1)
    make_graded_submission(user, score=0.5, question_id="q1", completed_at=t0)
    alice_best = make_graded_submission(
        user, score=0.9, question_id="q1", completed_at=t0 + dt.timedelta(minutes=5)
    )
    bob_best = make_graded_submission(
        other_user, score=0.9, question_id="q1", completed_at=t0 + dt.timedelta(minutes=1)
    )
    make_graded_submission(
        other_user, score=0.9, question_id="q1", completed_at=t0 + dt.timedelta(minutes=9)
    )
    carol_best = make_graded_submission(carol, score=0.7, question_id="q1", completed_at=t0)
    make_graded_submission(carol, score=1.0, question_id="q2", completed_at=t0)
    make_graded_submission(carol, score=5.0, question_id="q1", status=SubmissionStatus.FAILED)
    make_graded_submission(
        carol, score=6.0, question_id="q1", status=SubmissionStatus.REVIEW_PENDING
    )

    with django_assert_num_queries(1):
        response = api_client.get("/api/leaderboard/", {"question_id": "q1"})

    assert response.status_code == HTTPStatus.OK
    rows = response.json()
    assert [(r["rank"], r["user"]["username"], r["submission_id"]) for r in rows] == [
        (1, "bob", bob_best.pk),
        (2, "alice", alice_best.pk),
        (3, "carol", carol_best.pk),
    ]
    assert rows[0]["score"] == 0.9
    assert rows[0]["user"] == {"id": other_user.pk, "username": "bob"}
    assert rows[0]["completed_at"].endswith("Z")


def test_filters_by_skill_and_limit(api_client: APIClient, user: User, other_user: User) -> None:
    make_graded_submission(user, score=1, question_id="q", skill="en")
    make_graded_submission(other_user, score=2, question_id="q", skill="ja")

    rows = api_client.get("/api/leaderboard/", {"question_id": "q", "skill": "en"}).json()
    assert [r["user"]["username"] for r in rows] == ["alice"]
    rows = api_client.get("/api/leaderboard/", {"limit": 1}).json()
    assert [r["user"]["username"] for r in rows] == ["bob"]


@pytest.mark.parametrize("query", [{"limit": 0}, {"limit": "x"}, {"question_id": "a\x00"}])
def test_bad_query_is_400(api_client: APIClient, query: dict[str, Any]) -> None:
    response = api_client.get("/api/leaderboard/", query)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_request"


def test_leaderboard_query_uses_the_leaderboard_index(user: User) -> None:
    from django.db import connection

    from apps.review.selectors import leaderboard_best

    make_graded_submission(user, score=1, question_id="q", skill="s")
    sql, params = leaderboard_best(question_id="q", skill="s").query.sql_with_params()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute(f"EXPLAIN {sql}", params)
        else:
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        plan = " ".join(str(row) for row in cursor.fetchall())

    assert "submissions_leaderboard" in plan
