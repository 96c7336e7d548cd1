"""A submission's status outside the grading lease: `submission_transition` (the columns a
status change may carry: score and reason) and the job submission's raw-SQL seal
(`submission_seal_ready`, draft → pending), which asks the same transition table first.

The lease columns (`lease_token`, `lease_expires_at`, `attempts`) are not written here: every
move that takes, ends or clears a lease is in `apps.submissions.services.leases`.
"""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.utils import timezone

from apps.core.sql import SqlStatement
from apps.core.validation import contains_nul
from apps.submissions.models import (
    SUBMISSION_TRANSITIONS,
    Submission,
    SubmissionFile,
    SubmissionKind,
    SubmissionStatus,
)


def submission_transition(
    *,
    submission: Submission,
    to: SubmissionStatus,
    score: float | None = None,
    status_reason: str | None = None,
) -> Submission:
    """Move a submission to `to` (raising InvalidTransition unless the table allows it).

    Compare-and-set: the row is updated only if it is still in the status the caller read, so
    a stale caller can never overwrite a newer state; a lost race raises InvalidTransition.
    Call it with the row locked (`submission_get(for_update=True)`) when other fields depend
    on what was read. `score` and `status_reason` are written in the same UPDATE when given
    (None leaves them as they are); `completed_at` is set on completed. `submission` is
    returned with the written values.
    """
    values = submission_status_values(to=to)
    if score is not None:
        values["score"] = score
    if status_reason is not None:
        values["status_reason"] = status_reason
    return SUBMISSION_TRANSITIONS.move_one(submission, to=to, **values)


def submission_status_values(*, to: SubmissionStatus) -> dict[str, Any]:
    """The columns every status change writes: `updated_at`, and `completed_at` on completed."""
    now = timezone.now()
    values: dict[str, Any] = {"updated_at": now}
    if to == SubmissionStatus.COMPLETED:
        values["completed_at"] = now
    return values


# Raw SQL on purpose: the ORM spent several times longer compiling this UPDATE (two correlated
# EXISTS) than the database spent running it, on the hottest write path (docs/benchmarks.md).
# A predictions submission has no entrypoint or config file to find (SPEC §11.2). RETURNING
# (PostgreSQL; SQLite since 3.35) tells the caller the kind without a second query.
_SEAL_READY = SqlStatement(
    "UPDATE {s} SET {s.status} = %s, {s.updated_at} = %s"
    " WHERE {s.id} = %s AND {s.owner} = %s AND {s.status} = %s"
    " AND ({s.kind} = %s"
    " OR (EXISTS (SELECT 1 FROM {f} f WHERE f.{f.submission} = {s}.{s.id}"
    " AND f.{f.filename} = {s}.{s.entrypoint})"
    " AND EXISTS (SELECT 1 FROM {f} f WHERE f.{f.submission} = {s}.{s.id}"
    " AND f.{f.filename} = {s}.{s.config_file})))"
    " RETURNING {s.kind}",
    s=Submission,
    f=SubmissionFile,
)


def submission_seal_ready(*, submission_id: str, user_id: int) -> bool:
    """Move the user's complete draft `submission_id` to `pending` in one conditional UPDATE.

    The fast path of job submission: True when the row was the user's, a draft, and complete
    (its entrypoint and config file uploaded; a predictions submission needs neither), and is
    now `pending` (row locked until the transaction ends). False changes nothing: the caller
    then runs the locked path (`submission_get(for_update)`, then the checks in the SPEC's
    order) to raise the right error. A concurrent upload can only add files, and entrypoint,
    config file and kind never change, so a stale read here can only make it return False,
    never seal an incomplete submission. Raises IntegrityError when the in-flight constraint
    refuses the move (on PostgreSQL that aborts the transaction).
    """
    return submission_seal_ready_kind(submission_id=submission_id, user_id=user_id) is not None


def submission_seal_ready_kind(*, submission_id: str, user_id: int) -> str | None:
    """`submission_seal_ready`, answering the sealed submission's `kind` (None: nothing
    changed)."""
    if contains_nul(submission_id):
        return None
    # The same table as every other status change: draft → pending.
    SUBMISSION_TRANSITIONS.assert_allowed(SubmissionStatus.DRAFT, SubmissionStatus.PENDING)
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    params = [SubmissionStatus.PENDING.value, now, submission_id, user_id]
    row = _SEAL_READY.fetchone(
        [*params, SubmissionStatus.DRAFT.value, SubmissionKind.PREDICTIONS.value]
    )
    return None if row is None else str(row[0])
