"""The grading lease of a submission: the only code that writes `lease_token`,
`lease_expires_at` and `attempts` (`tests/test_lease_writers.py` holds every other module of
the apps that may write a submission to it).

A grading worker holds a submission while it grades it: a random token and an expiry, renewed
while the worker lives, and an attempt count that bounds retries (GRADING_MAX_ATTEMPTS). The
protocol, each step one compare-and-set UPDATE that writes nothing when the row is no longer
what the caller read:

    take        pending → processing, a new token, attempts + 1     (row read under lock)
    take over   processing under an expired token → a new token, attempts + 1
    renew       push the expiry of a token that is still the row's
    release     give a token back unfinished: it expires now, the attempt not counted
    end         processing under the token → the result's status; lease cleared
    exhausted   processing → failed, lease cleared (no attempt left)
    cancel      pending/processing → failed, lease cleared (the job was cancelled)
    reset       completed/failed → pending with no lease and no attempt (a staff regrade)

`take` and `take over` return the attempt number the new lease counts. It is the count the
caller read under the row lock plus one, and the UPDATE matches that count as well as the
status and token: when it writes a row, the row holds exactly that number.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import F
from django.utils import timezone

from apps.submissions.models import SUBMISSION_TRANSITIONS, Submission, SubmissionStatus
from apps.submissions.services.transitions import submission_status_values

_CLEARED: dict[str, Any] = {"lease_token": "", "lease_expires_at": None}


def submission_lease_take(
    *, submission: Submission, token: str, expires_at: dt.datetime
) -> int | None:
    """pending → processing under a new lease (`token` until `expires_at`), attempts + 1,
    the reason cleared. Returns the attempt number of the new lease; None, writing nothing,
    when the row is no longer pending with the attempt count `submission` was read with.
    Call it with the row locked (`select_for_update`)."""
    attempt = submission.attempts + 1
    rows = Submission.objects.filter(pk=submission.pk, attempts=submission.attempts)
    moved = SUBMISSION_TRANSITIONS.move(
        rows,
        old=SubmissionStatus.PENDING,
        to=SubmissionStatus.PROCESSING,
        lease_token=token,
        lease_expires_at=expires_at,
        attempts=attempt,
        status_reason="",
        updated_at=timezone.now(),
    )
    return attempt if moved == 1 else None


def submission_lease_take_over(
    *, submission: Submission, token: str, expires_at: dt.datetime
) -> int | None:
    """Replace the expired lease `submission` was read with (still processing) by `token`
    until `expires_at`, attempts + 1. Returns the attempt number of the new lease; None,
    writing nothing, when the row is no longer processing under that token and count."""
    attempt = submission.attempts + 1
    taken = Submission.objects.filter(
        pk=submission.pk,
        status=SubmissionStatus.PROCESSING,
        lease_token=submission.lease_token,
        attempts=submission.attempts,
    ).update(
        lease_token=token,
        lease_expires_at=expires_at,
        attempts=attempt,
        updated_at=timezone.now(),
    )
    return attempt if taken == 1 else None


def submission_lease_renew(*, submission_id: str, token: str, expires_at: dt.datetime) -> bool:
    """Push the expiry of the lease `token` to `expires_at` while it is still the submission's;
    False once it is not (taken over, cancelled, result written)."""
    return (
        Submission.objects.filter(
            pk=submission_id, status=SubmissionStatus.PROCESSING, lease_token=token
        ).update(lease_expires_at=expires_at)
        == 1
    )


def submission_lease_release(*, submission_id: str, token: str) -> bool:
    """Give the lease `token` back unfinished (its worker is stopping): it expires now, so the
    next delivery takes it over at once, and the attempt is not counted (attempts - 1). False,
    writing nothing, when the lease is no longer the submission's."""
    return (
        Submission.objects.filter(
            pk=submission_id,
            status=SubmissionStatus.PROCESSING,
            lease_token=token,
            attempts__gt=0,
        ).update(lease_expires_at=timezone.now(), attempts=F("attempts") - 1)
        == 1
    )


def submission_lease_end(
    *,
    submission_id: str,
    token: str,
    to: SubmissionStatus,
    score: float | None = None,
    reason: str = "",
) -> bool:
    """Write a grading's result under the lease `token`: processing → `to` (completed,
    review_pending or failed) with the score and reason, the lease cleared, in one
    compare-and-set UPDATE. False, writing nothing, when the lease is no longer the
    submission's (taken over after expiry, or cleared by a cancel); InvalidTransition when
    the table does not allow processing → `to`."""
    rows = Submission.objects.filter(pk=submission_id, lease_token=token)
    moved = SUBMISSION_TRANSITIONS.move(
        rows,
        old=SubmissionStatus.PROCESSING,
        to=to,
        score=score,
        status_reason=reason,
        **_CLEARED,
        **submission_status_values(to=to),
    )
    return moved == 1


def submission_lease_exhausted(*, submission: Submission, reason: str) -> Submission:
    """processing → failed with `reason` and the lease cleared: the lease `submission` was
    read with expired and no attempt is left. Call it with the row locked; InvalidTransition
    when the row is no longer processing under that lease."""
    return SUBMISSION_TRANSITIONS.move_one(
        submission,
        to=SubmissionStatus.FAILED,
        where={"lease_token": submission.lease_token},
        status_reason=reason,
        **_CLEARED,
        **submission_status_values(to=SubmissionStatus.FAILED),
    )


def submission_lease_cancel(*, submission: Submission, reason: str) -> Submission:
    """An in-flight submission (pending or processing) → failed with `reason`, its lease
    cleared, so a worker still grading it loses the lease and cannot write a result. Call it
    with the row locked; InvalidTransition when it left the status it was read with."""
    return SUBMISSION_TRANSITIONS.move_one(
        submission,
        to=SubmissionStatus.FAILED,
        status_reason=reason,
        **_CLEARED,
        **submission_status_values(to=SubmissionStatus.FAILED),
    )


def submission_lease_reset(*, submission: Submission, reason: str) -> Submission:
    """completed/failed → pending with no score, no lease and no attempt counted, so the next
    grading gets a fresh GRADING_MAX_ATTEMPTS (a staff regrade). Call it with the row locked;
    InvalidTransition from another status or when it left the status it was read with."""
    return SUBMISSION_TRANSITIONS.move_one(
        submission,
        to=SubmissionStatus.PENDING,
        score=None,
        completed_at=None,
        status_reason=reason,
        attempts=0,
        **_CLEARED,
        **submission_status_values(to=SubmissionStatus.PENDING),
    )
