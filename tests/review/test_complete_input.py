"""A verdict's input has one home: the serializer parses shapes, `review_complete` owns the
rules (verdict, finite score, comment length and NUL). Each refusal's body is pinned."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.core.exceptions import InvalidRequest
from apps.review.models import ReviewClaim, ReviewRecord
from apps.review.services import review_claim, review_complete
from apps.submissions.models import Submission, SubmissionStatus
from tests.factories.submissions import make_stored_submission

pytestmark = pytest.mark.django_db

LONG = "x" * 10_001
TOO_LONG = "Ensure this field has no more than 10000 characters."
NUL = "Null characters are not allowed."


@pytest.fixture
def claimed(user: User, reviewer: User) -> Submission:
    submission = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    review_claim(user=reviewer, submission_id=submission.pk)
    return submission


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        # Shapes, refused by the serializer.
        ({}, {"verdict": ["This field is required."]}),
        ({"verdict": None}, {"verdict": ["This field may not be null."]}),
        ({"verdict": "approve", "score": "high"}, {"score": ["A valid number is required."]}),
        ({"verdict": "approve", "score": "nan"}, {"score": ["A valid number is required."]}),
        ({"verdict": "approve", "comment": None}, {"comment": ["This field may not be null."]}),
        ({"verdict": "approve", "comment": ["a"]}, {"comment": ["Not a valid string."]}),
        # Rules, refused by the service.
        ({"verdict": "maybe"}, {"verdict": ['"maybe" is not a valid choice.']}),
        ({"verdict": ""}, {"verdict": ['"" is not a valid choice.']}),
        ({"verdict": True}, {"verdict": ['"True" is not a valid choice.']}),
        ({"verdict": 1}, {"verdict": ['"1" is not a valid choice.']}),
        ({"verdict": [1]}, {"verdict": ['"[1]" is not a valid choice.']}),
        ({"verdict": "approve", "comment": "a\x00b"}, {"comment": [NUL]}),
        ({"verdict": "approve", "comment": LONG}, {"comment": [TOO_LONG]}),
        ({"verdict": "approve", "comment": LONG + "\x00"}, {"comment": [TOO_LONG, NUL]}),
        (
            {"verdict": "maybe", "comment": "a\x00"},
            {"verdict": ['"maybe" is not a valid choice.'], "comment": [NUL]},
        ),
    ],
)
def test_a_bad_verdict_body_is_a_400_with_its_pinned_fields_and_changes_nothing(
    claimed: Submission, reviewer_client: APIClient, body: dict[str, Any], fields: Any
) -> None:
    url = f"/api/review/submissions/{claimed.pk}/complete/"

    response = reviewer_client.post(url, body, format="json")

    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    error = "; ".join(f"{name}: {messages[0]}" for name, messages in fields.items())
    assert response.json() == {
        "success": False,
        "code": "invalid_request",
        "error": error,
        "fields": fields,
    }
    assert ReviewClaim.objects.filter(submission=claimed).exists()
    assert not ReviewRecord.objects.exists()


def test_a_comment_is_trimmed_before_its_length_is_counted(
    claimed: Submission, reviewer_client: APIClient
) -> None:
    url = f"/api/review/submissions/{claimed.pk}/complete/"
    body = {"verdict": "approve", "comment": "x" * 10_000 + "   "}

    response = reviewer_client.post(url, body, format="json")

    assert response.status_code == HTTPStatus.OK, response.content
    assert ReviewRecord.objects.get().comment == "x" * 10_000


@pytest.mark.parametrize(
    ("options", "fields"),
    [
        ({"verdict": "maybe"}, {"verdict": ['"maybe" is not a valid choice.']}),
        ({"verdict": "approve", "score": float("nan")}, {"score": ["Must be a finite number."]}),
        ({"verdict": "approve", "score": float("inf")}, {"score": ["Must be a finite number."]}),
        ({"verdict": "approve", "comment": LONG + "\x00"}, {"comment": [TOO_LONG, NUL]}),
    ],
)
def test_the_service_owns_the_rules_without_the_serializer(
    claimed: Submission, reviewer: User, options: dict[str, Any], fields: Any
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        review_complete(user=reviewer, submission_id=claimed.pk, **options)

    assert refused.value.extra["fields"] == fields
    assert refused.value.message == "; ".join(f"{k}: {v[0]}" for k, v in fields.items())
    assert not ReviewRecord.objects.exists()
