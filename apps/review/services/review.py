"""Review claims, verdicts and staff regrades (SPEC §5).

Who may call is the caller's declaration, asked before these run (the review API's
`IsReviewer` / `IsReviewerOrStaff`; the admin is staff-only): the services decide only what
depends on the submission (its owner, its claim, its status) and on the input."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from apps.core.cleanup import CleanupReport
from apps.core.exceptions import InvalidRequest, InvalidTransition
from apps.core.validation import contains_nul
from apps.grading.queueing import grading_enqueue
from apps.jobs.admission import job_admit
from apps.jobs.models import Job
from apps.jobs.selectors import job_latest
from apps.review.exceptions import (
    AlreadyClaimed,
    NotClaimHolder,
    OwnSubmission,
    RegradeConflict,
    StaffOnly,
)
from apps.review.metrics import review_claim_conflict, review_verdict
from apps.review.models import ReviewClaim, ReviewRecord, ReviewVerdict
from apps.review.selectors import review_entered_at
from apps.submissions.models import SUBMISSION_TRANSITIONS, Submission, SubmissionStatus
from apps.submissions.selectors import submission_get
from apps.submissions.services.leases import submission_lease_reset
from apps.submissions.services.transitions import submission_transition

logger = logging.getLogger(__name__)

AnyUser = AbstractBaseUser | AnonymousUser
MAX_COMMENT_LENGTH = 10_000
_COMMENT_TOO_LONG = f"Ensure this field has no more than {MAX_COMMENT_LENGTH} characters."


def _user_id(user: AnyUser) -> int:
    pk: Any = user.pk
    return int(pk)


def _is_staff(user: AnyUser) -> bool:
    return bool(user.is_authenticated and getattr(user, "is_staff", False))


def claim_ttl() -> timedelta:
    return timedelta(seconds=float(settings.REVIEW_CLAIM_TTL))


def _user_body(user: Any) -> dict[str, Any]:
    return {"id": user.pk, "username": user.get_username()}


def _refuse_own(submission: Submission, user: AnyUser, *, allow_own: bool = False) -> None:
    """Nobody judges their own work: OwnSubmission unless `allow_own` (the admin's override)."""
    if not allow_own and submission.owner_id == user.pk:
        raise OwnSubmission(extra={"submission_id": submission.pk})


def _awaiting_review(submission: Submission) -> None:
    if submission.status != SubmissionStatus.REVIEW_PENDING:
        raise InvalidTransition(
            f"Submission {submission.pk} is {submission.status}, not awaiting review.",
            extra={"from_status": submission.status},
        )


def _already_claimed(claim: ReviewClaim) -> AlreadyClaimed:
    return AlreadyClaimed(
        f"Submission {claim.submission_id} is claimed by {claim.reviewer.get_username()} "
        f"until {claim.expires_at.isoformat()}.",
        extra={
            "claimed_by": _user_body(claim.reviewer),
            # The same rendering as DRF's DateTimeField in 200 responses.
            "claim_expires_at": claim.expires_at.isoformat().replace("+00:00", "Z"),
        },
    )


@dataclass(frozen=True)
class ClaimState:
    submission_id: str
    claimed_by: Any
    claim_expires_at: datetime


def review_claim(*, user: AnyUser, submission_id: str) -> ClaimState:
    """Claim a review_pending submission for `user` for REVIEW_CLAIM_TTL.

    Exactly one of any number of concurrent claimers wins. The submission row is locked; the
    claim row is then taken by a conditional UPDATE that matches only a claim held by `user`
    (re-claiming extends it) or an expired one, else inserted (the submission is the claim's
    primary key, so two inserts cannot both land). `user` is a reviewer: the caller asks the
    role (the API's `IsReviewer`), as for every service of this module. Raises NotFound
    (404), OwnSubmission (409, `user` owns it), InvalidTransition (409, not review_pending),
    AlreadyClaimed (409, with the holder).
    """
    with transaction.atomic():
        submission = submission_get(submission_id=submission_id, for_update=True)
        _refuse_own(submission, user)
        _awaiting_review(submission)
        now = timezone.now()
        expires_at = now + claim_ttl()
        mine_or_expired = ReviewClaim.objects.filter(
            Q(reviewer_id=user.pk) | Q(expires_at__lte=now), submission_id=submission.pk
        )
        updated = mine_or_expired.update(reviewer_id=user.pk, claimed_at=now, expires_at=expires_at)
        if updated == 0:
            try:
                with transaction.atomic():
                    ReviewClaim.objects.create(
                        submission_id=submission.pk,
                        reviewer_id=_user_id(user),
                        claimed_at=now,
                        expires_at=expires_at,
                    )
            except IntegrityError:
                holder = ReviewClaim.objects.select_related("reviewer").get(
                    submission_id=submission.pk
                )
                review_claim_conflict()
                raise _already_claimed(holder) from None
    return ClaimState(submission_id=submission.pk, claimed_by=user, claim_expires_at=expires_at)


def review_claim_extend(*, user: AnyUser, submission_id: str) -> ClaimState:
    """Renew `user`'s live claim for another REVIEW_CLAIM_TTL (conditional UPDATE).

    Raises NotFound, OwnSubmission, InvalidTransition (not review_pending), NotClaimHolder (no
    live claim of `user`: expired, released or taken over).
    """
    with transaction.atomic():
        submission = submission_get(submission_id=submission_id, for_update=True)
        _refuse_own(submission, user)
        _awaiting_review(submission)
        now = timezone.now()
        expires_at = now + claim_ttl()
        renewed = ReviewClaim.objects.filter(
            submission_id=submission.pk, reviewer_id=user.pk, expires_at__gt=now
        ).update(expires_at=expires_at)
        if renewed != 1:
            raise NotClaimHolder()
    return ClaimState(submission_id=submission.pk, claimed_by=user, claim_expires_at=expires_at)


def review_claim_release(*, user: AnyUser, submission_id: str) -> bool:
    """Give up a claim: the claimer (live claim) or staff (any claim). Idempotent for staff.

    Returns whether a claim row was removed. `user` is a reviewer or staff (the API's
    `IsReviewerOrStaff`). Raises NotFound, NotClaimHolder (a reviewer without a live claim).
    """
    staff = _is_staff(user)
    with transaction.atomic():
        submission = submission_get(submission_id=submission_id, for_update=True)
        claims = ReviewClaim.objects.filter(submission_id=submission.pk)
        if not staff:
            claims = claims.filter(reviewer_id=user.pk, expires_at__gt=timezone.now())
        removed, _ = claims.delete()
        if removed == 0 and not staff:
            raise NotClaimHolder()
    return removed > 0


def review_claim_expire(*, submission_id: str) -> bool:
    """Staff/admin: end a claim now so another reviewer can take it; idempotent."""
    now = timezone.now()
    return (
        ReviewClaim.objects.filter(submission_id=submission_id, expires_at__gt=now).update(
            expires_at=now
        )
        > 0
    )


def review_claims_purge(*, now: datetime, dry_run: bool = False) -> CleanupReport:
    """Cleanup kind `claims`: delete claims that expired or whose submission left review.

    Expiry is already in force at query time, so this only tidies. The DELETE repeats the
    condition, so a claim renewed meanwhile is kept. `dry_run` lists and deletes nothing.
    """
    stale = Q(expires_at__lte=now) | ~Q(submission__status=SubmissionStatus.REVIEW_PENDING)
    items = [
        str(pk) for pk in ReviewClaim.objects.filter(stale).values_list("submission_id", flat=True)
    ]
    if dry_run:
        return CleanupReport(kind="claims", count=len(items), items=items)
    removed, _ = ReviewClaim.objects.filter(stale, submission_id__in=items).delete()
    return CleanupReport(kind="claims", count=removed, items=items)


def _review_input_check(*, verdict: str, score: float | None, comment: str) -> None:
    """InvalidRequest naming every failing field, in the order verdict, score, comment: the one
    home of a verdict's input rules (the API's serializer parses only its shapes)."""
    fields: dict[str, list[str]] = {}
    if verdict not in ReviewVerdict.values:
        fields["verdict"] = [f'"{verdict}" is not a valid choice.']
    if score is not None and not math.isfinite(score):
        fields["score"] = ["Must be a finite number."]
    comment_problems = [
        problem
        for broken, problem in (
            (len(comment) > MAX_COMMENT_LENGTH, _COMMENT_TOO_LONG),
            (contains_nul(comment), "Null characters are not allowed."),
        )
        if broken
    ]
    if comment_problems:
        fields["comment"] = comment_problems
    if fields:
        message = "; ".join(f"{name}: {problems[0]}" for name, problems in fields.items())
        raise InvalidRequest(message, fields=fields)


def review_complete(
    *,
    user: AnyUser,
    submission_id: str,
    verdict: str,
    score: float | None = None,
    comment: str = "",
) -> ReviewRecord:
    """Record a reviewer's verdict: approve → completed (with `score` if given), reject → failed.

    Locks the submission. Only the holder of a live claim may complete; the claim is consumed
    by a conditional DELETE in the same transaction, so a reviewer whose claim expired and was
    taken over can never complete, and nobody completes a review of their own submission
    (even holding a claim made before that rule). `user` is a reviewer (the API's
    `IsReviewer`). Raises InvalidRequest (bad verdict, score or comment: this is the rules' one
    home), NotFound, OwnSubmission, InvalidTransition (not review_pending, e.g. already
    finished), NotClaimHolder.
    """
    _review_input_check(verdict=verdict, score=score, comment=comment)
    with transaction.atomic():
        submission = submission_get(submission_id=submission_id, for_update=True)
        _refuse_own(submission, user)
        target = (
            SubmissionStatus.COMPLETED
            if verdict == ReviewVerdict.APPROVE
            else SubmissionStatus.FAILED
        )
        SUBMISSION_TRANSITIONS.assert_allowed(SubmissionStatus(submission.status), target)
        consumed, _ = ReviewClaim.objects.filter(
            submission_id=submission.pk, reviewer_id=user.pk, expires_at__gt=timezone.now()
        ).delete()
        if consumed == 0:
            raise NotClaimHolder()
        submission_transition(
            submission=submission,
            to=target,
            score=score if verdict == ReviewVerdict.APPROVE else None,
            status_reason=f"Reviewed by {user.get_username()}: {verdict}.",
        )
        record = ReviewRecord.objects.create(
            submission=submission,
            reviewer_id=_user_id(user),
            verdict=verdict,
            score=score,
            comment=comment,
        )
    entered = review_entered_at(submission_id=submission.pk)
    review_verdict(verdict=verdict, waited=None if entered is None else record.created_at - entered)
    logger.info("review: %s %sd submission %s", user.get_username(), verdict, submission.pk)
    return record


@dataclass(frozen=True)
class RegradeResult:
    submission: Submission
    job: Job


def submission_regrade(
    *, user: AnyUser, submission_id: str, allow_own: bool = False
) -> RegradeResult:
    """Staff: send a completed/failed submission back to pending with a new queued job.

    Locks the submission; the transition table allows completed/failed → pending only (else
    InvalidTransition). Clears score, reason and the attempt count (a regrade gets a fresh
    GRADING_MAX_ATTEMPTS). The new job is admitted like any other (`apps.jobs.admission`,
    under the owner's policy lock): the owner's concurrent-job limit holds, so an owner whose
    slots are all taken gets no regrade (QuotaExceeded, 429 `quota_exceeded`; retry once a
    job finishes). A regrade is the platform's decision, not the owner's: it costs nothing and
    is exempt from the daily and cost limits. It reruns the previous job's config and resource
    class (`DEFAULT_RESOURCE_CLASS` when there was none). Grading is enqueued after commit. A
    staff member's own submission is refused (OwnSubmission) unless `allow_own`: the admin's
    action passes it (a deliberate, audited override), the API never does. Raises StaffOnly
    (403), NotFound, OwnSubmission, InvalidTransition, QuotaExceeded, RegradeConflict (409: the
    owner already has an in-flight submission for the same question and skill). Locks, in
    order: submission row, then the owner's policy row (job submission's order).
    """
    if not _is_staff(user):
        raise StaffOnly()
    try:
        with transaction.atomic():
            submission = submission_get(submission_id=submission_id, for_update=True)
            _refuse_own(submission, user, allow_own=allow_own)
            previous = job_latest(submission_id=submission.pk)
            submission_lease_reset(
                submission=submission, reason=f"Regrade requested by {user.get_username()}."
            )
            job = job_admit(
                user=submission.owner,
                submission_id=submission.pk,
                config=dict(previous.config) if previous else {},
                resource_class=(
                    previous.resource_class if previous else settings.DEFAULT_RESOURCE_CLASS
                ),
                cost=0,
                exempt_from_daily_and_cost=True,
            ).job
            grading_enqueue(job_id=job.pk)
    except IntegrityError as exc:
        raise RegradeConflict() from exc
    logger.info("regrade: submission %s by %s, job %s", submission.pk, user, job.pk)
    return RegradeResult(submission=submission, job=job)
