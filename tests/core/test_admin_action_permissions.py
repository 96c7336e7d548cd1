"""Every admin action needs a permission beyond "view": a staff user who may only look at a
model can neither see nor run its actions (a crafted POST changes nothing); a user with the
action's permission ("change", or "delete" for deleting drafts) can."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone

from apps.jobs.admission import reservation_reserve
from apps.jobs.models import Job, JobStatus
from apps.quotas.models import Reservation
from apps.review.models import ReviewClaim
from apps.review.services import review_claim
from apps.schedule.models import Life, LifeState, Plan, PlanState
from apps.submissions.models import Submission, SubmissionStatus
from tests.factories.jobs import make_job
from tests.factories.schedule import book_point
from tests.factories.submissions import make_graded_submission, make_stored_submission
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class ActionCase:
    app: str
    model: str
    action: str
    permission: str  # the one besides "view" that the action needs
    # Makes the target as `owner` and returns (pk to select, "did the action happen?").
    arrange: Callable[[User], tuple[Any, Callable[[], bool]]]

    @property
    def url(self) -> str:
        return f"/admin/{self.app}/{self.model}/"


def _queued_job(owner: User) -> tuple[Any, Callable[[], bool]]:
    job = make_job(make_stored_submission(owner))
    return job.pk, lambda: Job.objects.get(pk=job.pk).status == JobStatus.CANCELLED


def _draft(owner: User) -> tuple[Any, Callable[[], bool]]:
    draft = Submission.objects.create(owner=owner)
    return draft.pk, lambda: not Submission.objects.filter(pk=draft.pk).exists()


def _reservation(owner: User) -> tuple[Any, Callable[[], bool]]:
    reservation = reservation_reserve(user=owner)
    return (
        reservation.pk,
        lambda: Reservation.objects.get(pk=reservation.pk).released_at is not None,
    )


def _finished_submission(owner: User) -> tuple[Any, Callable[[], bool]]:
    submission = make_graded_submission(owner, score=1.0)
    return (
        submission.pk,
        lambda: Submission.objects.get(pk=submission.pk).status == SubmissionStatus.PENDING,
    )


def _claimed(owner: User) -> tuple[str, Callable[[], bool]]:
    submission = make_stored_submission(owner, status=SubmissionStatus.REVIEW_PENDING)
    review_claim(user=make_user(username="reviewer", reviewer=True), submission_id=submission.pk)
    return (
        submission.pk,
        lambda: ReviewClaim.objects.get(submission_id=submission.pk).expires_at <= timezone.now(),
    )


def _life(owner: User) -> tuple[Any, Callable[[], bool]]:
    life = book_point(owner, url="/api/me/")
    return life.pk, lambda: Life.objects.get(pk=life.pk).state == LifeState.STILLBIRTH


def _failed_plan(owner: User) -> tuple[Plan, Callable[[], bool]]:
    life = book_point(owner, url="/api/me/")
    plan = life.plans.get()
    Plan.objects.filter(pk=plan.pk).update(state=PlanState.FAILED, finished_at=timezone.now())
    return plan, lambda: Plan.objects.get(pk=plan.pk).state == PlanState.STANDBY


def _life_with_failed_plan(owner: User) -> tuple[Any, Callable[[], bool]]:
    plan, retried = _failed_plan(owner)
    return plan.life_id, retried


def _plan_with_failed_state(owner: User) -> tuple[Any, Callable[[], bool]]:
    plan, retried = _failed_plan(owner)
    return plan.pk, retried


CASES = [
    ActionCase("jobs", "job", "cancel_jobs", "change", _queued_job),
    ActionCase("submissions", "submission", "delete_drafts_with_files", "delete", _draft),
    ActionCase("quotas", "reservation", "release_reservations", "change", _reservation),
    ActionCase(
        "review", "submissionunderreview", "regrade_submissions", "change", _finished_submission
    ),
    ActionCase("review", "submissionunderreview", "expire_claims", "change", _claimed),
    ActionCase("review", "reviewclaim", "expire_claims", "change", _claimed),
    ActionCase("schedule", "life", "cancel_lives", "change", _life),
    ActionCase("schedule", "life", "retry_failed_plans", "change", _life_with_failed_plan),
    ActionCase("schedule", "plan", "retry_failed", "change", _plan_with_failed_state),
]
IDS = [f"{case.model}.{case.action}" for case in CASES]


def _staff_client(username: str, app: str, codenames: list[str]) -> Client:
    staff = make_user(username=username, is_staff=True)
    staff.user_permissions.add(
        *Permission.objects.filter(content_type__app_label=app, codename__in=codenames)
    )
    client = Client()
    client.force_login(staff)
    return client


def _run(client: Client, case: ActionCase, pk: Any) -> Any:
    return client.post(case.url, {"action": case.action, "_selected_action": [pk]})


def test_every_admin_action_is_covered() -> None:
    from django.contrib import admin

    declared = {
        (model._meta.app_label, model._meta.model_name, name)
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label in {"jobs", "submissions", "quotas", "review", "schedule"}
        for action in model_admin.actions or ()
        for name in [action if isinstance(action, str) else action.__name__]
    }
    assert declared == {(case.app, case.model, case.action) for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_view_only_staff_neither_sees_nor_runs_the_action(user: User, case: ActionCase) -> None:
    pk, happened = case.arrange(user)
    client = _staff_client("viewer", case.app, [f"view_{case.model}"])

    page = client.get(case.url)
    assert page.status_code == HTTPStatus.OK  # may look ...
    assert f'value="{case.action}"' not in page.content.decode()  # ... but is not offered it

    response = _run(client, case, pk)
    assert response.status_code in {HTTPStatus.OK, HTTPStatus.FOUND}
    assert not happened()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_staff_with_the_permission_runs_the_action(user: User, case: ActionCase) -> None:
    pk, happened = case.arrange(user)
    client = _staff_client(
        "operator", case.app, [f"view_{case.model}", f"{case.permission}_{case.model}"]
    )

    assert f'value="{case.action}"' in client.get(case.url).content.decode()
    response = _run(client, case, pk)
    assert response.status_code == HTTPStatus.FOUND
    assert happened()
