"""Review API: queue, claim, extend, release, complete, regrade — statuses and exact codes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.jobs.models import Job, JobStatus
from apps.review.models import ReviewClaim, ReviewRecord
from apps.submissions.models import Submission, SubmissionStatus
from tests.factories.submissions import make_graded_submission, make_stored_submission
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db

Client = Callable[[User], APIClient]


def _url(submission: Submission, action: str) -> str:
    return f"/api/review/submissions/{submission.pk}/{action}/"


@pytest.fixture
def waiting(user: User) -> Submission:
    return make_stored_submission(
        user, status=SubmissionStatus.REVIEW_PENDING, score=0.4, question_id="q"
    )


def test_queue_lists_unclaimed_first_then_oldest(
    user: User, reviewer: User, other_reviewer: User, client_for: Client
) -> None:
    oldest = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    middle = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    newest = make_stored_submission(user, status=SubmissionStatus.REVIEW_PENDING)
    make_stored_submission(user, status=SubmissionStatus.COMPLETED)
    Submission.objects.filter(pk=oldest.pk).update(created_at=timezone.now() - dt.timedelta(3))
    Submission.objects.filter(pk=middle.pk).update(created_at=timezone.now() - dt.timedelta(2))
    client_for(other_reviewer).post(_url(oldest, "claim"))

    response = client_for(reviewer).get("/api/review/queue/")

    assert response.status_code == HTTPStatus.OK
    rows = response.json()
    assert [r["id"] for r in rows] == [middle.pk, newest.pk, oldest.pk]
    assert rows[0]["claimed_by"] is None
    assert rows[0]["owner"] == {"id": user.pk, "username": "alice"}
    assert rows[2]["claimed_by"] == {"id": other_reviewer.pk, "username": "ravi"}
    assert rows[2]["claim_expires_at"] is not None


def test_queue_shows_expired_claim_as_unclaimed(
    waiting: Submission, reviewer: User, other_reviewer: User, client_for: Client, settings: Any
) -> None:
    client_for(other_reviewer).post(_url(waiting, "claim"))
    later = timezone.now() + dt.timedelta(seconds=settings.REVIEW_CLAIM_TTL + 1)
    with time_machine.travel(later):
        rows = client_for(reviewer).get("/api/review/queue/").json()
    assert rows[0]["claimed_by"] is None
    assert rows[0]["claim_expires_at"] is None


@pytest.mark.parametrize(
    ("method", "action"),
    [
        ("get", None),
        ("post", "claim"),
        ("post", "extend"),
        ("post", "complete"),
        ("post", "release"),
    ],
)
def test_non_reviewers_get_403(
    user_client: APIClient, waiting: Submission, method: str, action: str | None
) -> None:
    url = "/api/review/queue/" if action is None else _url(waiting, action)
    response = getattr(user_client, method)(url, {"verdict": "approve"}, format="json")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["code"] == "permission_denied"


def test_anonymous_gets_401(api_client: APIClient, waiting: Submission) -> None:
    response = api_client.post(_url(waiting, "claim"))
    assert response.status_code == HTTPStatus.UNAUTHORIZED


def test_claim_returns_holder_and_expiry(
    waiting: Submission, reviewer: User, reviewer_client: APIClient, settings: Any
) -> None:
    with time_machine.travel(timezone.now(), tick=False):
        response = reviewer_client.post(_url(waiting, "claim"))
        expected = timezone.now() + dt.timedelta(seconds=settings.REVIEW_CLAIM_TTL)

    assert response.status_code == HTTPStatus.OK
    body = response.json()
    assert body["claimed_by"] == {"id": reviewer.pk, "username": "rita"}
    assert dt.datetime.fromisoformat(body["claim_expires_at"]) == expected


def test_claim_again_by_same_reviewer_extends(
    waiting: Submission, reviewer_client: APIClient
) -> None:
    first = reviewer_client.post(_url(waiting, "claim")).json()["claim_expires_at"]
    with time_machine.travel(timezone.now() + dt.timedelta(seconds=60)):
        second = reviewer_client.post(_url(waiting, "claim"))
    assert second.status_code == HTTPStatus.OK
    assert second.json()["claim_expires_at"] > first


def test_claim_held_by_other_is_409_already_claimed_with_holder(
    waiting: Submission, reviewer: User, other_reviewer: User, client_for: Client
) -> None:
    held = client_for(reviewer).post(_url(waiting, "claim")).json()

    response = client_for(other_reviewer).post(_url(waiting, "claim"))

    assert response.status_code == HTTPStatus.CONFLICT
    body = response.json()
    assert body["code"] == "already_claimed"
    assert body["claimed_by"] == {"id": reviewer.pk, "username": "rita"}
    assert body["claim_expires_at"] == held["claim_expires_at"]


def test_claim_unknown_is_404(reviewer_client: APIClient) -> None:
    response = reviewer_client.post(f"/api/review/submissions/{'0' * 32}/claim/")
    assert response.status_code == HTTPStatus.NOT_FOUND
    assert response.json()["code"] == "not_found"


def test_claim_not_awaiting_review_is_409_invalid_transition(
    user: User, reviewer_client: APIClient
) -> None:
    submission = make_stored_submission(user, status=SubmissionStatus.PROCESSING)
    response = reviewer_client.post(_url(submission, "claim"))
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "invalid_transition"


def test_extend_renews_a_live_claim(
    waiting: Submission, reviewer_client: APIClient, settings: Any
) -> None:
    reviewer_client.post(_url(waiting, "claim"))
    later = timezone.now() + dt.timedelta(seconds=settings.REVIEW_CLAIM_TTL - 5)
    with time_machine.travel(later, tick=False):
        response = reviewer_client.post(_url(waiting, "extend"))
        expected = later + dt.timedelta(seconds=settings.REVIEW_CLAIM_TTL)
    assert response.status_code == HTTPStatus.OK
    assert dt.datetime.fromisoformat(response.json()["claim_expires_at"]) == expected


def test_extend_after_expiry_is_409_not_claim_holder(
    waiting: Submission, reviewer_client: APIClient, settings: Any
) -> None:
    reviewer_client.post(_url(waiting, "claim"))
    later = timezone.now() + dt.timedelta(seconds=settings.REVIEW_CLAIM_TTL + 1)
    with time_machine.travel(later):
        response = reviewer_client.post(_url(waiting, "extend"))
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "not_claim_holder"


def test_release_by_claimer_lets_another_claim(
    waiting: Submission, reviewer: User, other_reviewer: User, client_for: Client
) -> None:
    client_for(reviewer).post(_url(waiting, "claim"))

    response = client_for(reviewer).post(_url(waiting, "release"))

    assert response.status_code == HTTPStatus.OK
    assert response.json() == {"submission_id": waiting.pk, "released": True}
    assert client_for(other_reviewer).post(_url(waiting, "claim")).status_code == HTTPStatus.OK


def test_release_by_non_holder_is_409(
    waiting: Submission, reviewer: User, other_reviewer: User, client_for: Client
) -> None:
    client_for(reviewer).post(_url(waiting, "claim"))
    response = client_for(other_reviewer).post(_url(waiting, "release"))
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "not_claim_holder"


def test_staff_can_release_any_claim(
    waiting: Submission, reviewer: User, staff_client: APIClient, client_for: Client
) -> None:
    client_for(reviewer).post(_url(waiting, "claim"))
    assert staff_client.post(_url(waiting, "release")).json()["released"] is True
    assert staff_client.post(_url(waiting, "release")).json()["released"] is False
    assert not ReviewClaim.objects.exists()


def test_complete_approve_records_review_and_completes(
    waiting: Submission, reviewer: User, reviewer_client: APIClient
) -> None:
    reviewer_client.post(_url(waiting, "claim"))

    response = reviewer_client.post(
        _url(waiting, "complete"),
        {"verdict": "approve", "score": 0.8, "comment": "fine"},
        format="json",
    )

    assert response.status_code == HTTPStatus.OK
    body = response.json()
    assert (body["status"], body["score"]) == ("completed", 0.8)
    assert body["review"]["reviewer"] == {"id": reviewer.pk, "username": "rita"}
    waiting.refresh_from_db()
    assert waiting.status == SubmissionStatus.COMPLETED
    assert waiting.completed_at is not None
    record = ReviewRecord.objects.get(submission=waiting)
    assert (record.verdict, record.score, record.comment) == ("approve", 0.8, "fine")
    assert not ReviewClaim.objects.exists()


def test_complete_approve_without_score_keeps_grader_score(
    waiting: Submission, reviewer_client: APIClient
) -> None:
    reviewer_client.post(_url(waiting, "claim"))
    body = reviewer_client.post(
        _url(waiting, "complete"), {"verdict": "approve"}, format="json"
    ).json()
    assert body["score"] == 0.4


def test_complete_reject_fails_submission(waiting: Submission, reviewer_client: APIClient) -> None:
    reviewer_client.post(_url(waiting, "claim"))
    body = reviewer_client.post(
        _url(waiting, "complete"), {"verdict": "reject", "comment": "copied"}, format="json"
    ).json()
    assert body["status"] == "failed"


def test_complete_without_claim_is_409_not_claim_holder(
    waiting: Submission, reviewer_client: APIClient
) -> None:
    response = reviewer_client.post(
        _url(waiting, "complete"), {"verdict": "approve"}, format="json"
    )
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "not_claim_holder"
    waiting.refresh_from_db()
    assert waiting.status == SubmissionStatus.REVIEW_PENDING


def test_complete_finished_is_409_invalid_transition(
    waiting: Submission, reviewer_client: APIClient
) -> None:
    reviewer_client.post(_url(waiting, "claim"))
    reviewer_client.post(_url(waiting, "complete"), {"verdict": "approve"}, format="json")

    response = reviewer_client.post(_url(waiting, "complete"), {"verdict": "reject"}, format="json")

    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "invalid_transition"
    assert ReviewRecord.objects.count() == 1


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"verdict": "maybe"},
        {"verdict": "approve", "score": "high"},
        {"verdict": "approve", "comment": "a\x00b"},
        {"verdict": "approve", "comment": "x" * 10_001},
    ],
    ids=["missing-verdict", "bad-verdict", "bad-score", "nul-comment", "long-comment"],
)
def test_complete_bad_input_is_400_and_changes_nothing(
    waiting: Submission, reviewer_client: APIClient, body: dict[str, Any]
) -> None:
    reviewer_client.post(_url(waiting, "claim"))
    response = reviewer_client.post(_url(waiting, "complete"), body, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_request"
    assert "fields" in response.json()
    assert ReviewClaim.objects.filter(submission=waiting).exists()


def test_regrade_by_staff_creates_a_free_job_and_enqueues(
    user: User, staff_client: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    submission = make_graded_submission(user, score=0.3)
    submission.attempts = 2
    submission.save(update_fields=["attempts"])

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = staff_client.post(_url(submission, "regrade"))

    assert response.status_code == HTTPStatus.CREATED
    body = response.json()
    submission.refresh_from_db()
    job = Job.objects.get(pk=body["job_id"])
    assert body["status"] == "pending"
    assert (submission.status, submission.score, submission.attempts) == ("pending", None, 0)
    assert submission.completed_at is None
    assert (job.status, job.cost, job.owner_id) == (JobStatus.QUEUED, 0, user.pk)
    assert len(callbacks) == 1


def test_regrade_by_non_staff_is_403(user: User, reviewer_client: APIClient) -> None:
    submission = make_graded_submission(user, score=0.3)
    response = reviewer_client.post(_url(submission, "regrade"))
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["code"] == "permission_denied"


def test_regrade_in_flight_is_409_invalid_transition(user: User, staff_client: APIClient) -> None:
    submission = make_stored_submission(user, status=SubmissionStatus.PROCESSING)
    response = staff_client.post(_url(submission, "regrade"))
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "invalid_transition"


def test_regrade_clashing_with_in_flight_submission_is_409(
    user: User, staff_client: APIClient
) -> None:
    make_stored_submission(user, status=SubmissionStatus.PENDING, question_id="q", skill="s")
    finished = make_graded_submission(user, score=1, question_id="q", skill="s")

    response = staff_client.post(_url(finished, "regrade"))

    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["code"] == "submission_in_flight"
    finished.refresh_from_db()
    assert finished.status == SubmissionStatus.COMPLETED
    assert not Job.objects.exists()


def test_regrade_unknown_is_404(staff_client: APIClient) -> None:
    response = staff_client.post(f"/api/review/submissions/{'f' * 32}/regrade/")
    assert response.status_code == HTTPStatus.NOT_FOUND


def test_superuser_without_explicit_permission_is_a_reviewer(
    waiting: Submission, staff_client: APIClient
) -> None:
    assert staff_client.post(_url(waiting, "claim")).status_code == HTTPStatus.OK


def test_plain_staff_without_permission_cannot_claim(
    waiting: Submission, client_for: Client
) -> None:
    staff = make_user(username="ops", is_staff=True)
    response = client_for(staff).post(_url(waiting, "claim"))
    assert response.status_code == HTTPStatus.FORBIDDEN


@pytest.mark.parametrize("raw", ["not-an-id", "%00" * 3, "A" * 32])
def test_malformed_ids_are_404(
    reviewer_client: APIClient, staff_client: APIClient, raw: str
) -> None:
    for client, action in ((reviewer_client, "claim"), (staff_client, "regrade")):
        response = client.post(f"/api/review/submissions/{raw}/{action}/")
        assert response.status_code == HTTPStatus.NOT_FOUND
        assert response.json()["code"] == "not_found"


def test_schema_documents_every_error_status(api_client: APIClient) -> None:
    schema = api_client.get("/api/schema/", {"format": "json"}).json()
    base = "/api/review/submissions/{submission_id}/"
    expected = {
        "claim/": {"200", "401", "403", "404", "409"},
        "extend/": {"200", "401", "403", "404", "409"},
        "release/": {"200", "401", "403", "404", "409"},
        "complete/": {"200", "400", "401", "403", "404", "409", "415"},
        "regrade/": {"201", "401", "403", "404", "409", "429"},
    }
    # Any operation may also be booked by a header (202) or have that booking refused.
    booking = {"202", "400", "406", "413", "429"}
    for action, statuses in expected.items():
        documented = set(schema["paths"][base + action]["post"]["responses"])
        assert documented == statuses | booking, action
    leaderboard = set(schema["paths"]["/api/leaderboard/"]["get"]["responses"])
    # 403: a token without the `read` scope.
    assert leaderboard == {"200", "400", "401", "403"} | booking


def test_a_reviewer_reads_the_files_output_and_attempts_before_a_verdict(
    user: Any, reviewer_client: Any, client_for: Any
) -> None:
    from apps.grading.models import GradingAttempt
    from apps.jobs.models import Job
    from tests.factories.jobs import make_job
    from tests.factories.submissions import make_stored_submission

    submission = make_stored_submission(
        user,
        program="print('hi')\n",
        status="review_pending",
        extra_files={"model.zip": b"PK\x05\x06" + bytes(18)},
    )
    job = make_job(submission, status="completed")
    Job.objects.filter(pk=job.pk).update(logs="grader output here")
    GradingAttempt.objects.create(
        submission=submission, job=job, number=1, lease_token="t" * 32,
        lease_expires_at=submission.created_at, outcome="review_pending",
        reason="The program asked for a human review.",
    )  # fmt: skip

    body = reviewer_client.get(f"/api/review/submissions/{submission.pk}/").json()

    files = {f["filename"]: f for f in body["files"]}
    assert files["main.py"]["text"] == "print('hi')\n"
    assert files["model.zip"]["text"] is None
    assert body["logs"] == "grader output here"
    assert body["attempts"][0]["reason"] == "The program asked for a human review."
    assert client_for(user).get(f"/api/review/submissions/{submission.pk}/").status_code == 403
    assert reviewer_client.get(f"/api/review/submissions/{'0' * 32}/").status_code == 404
