"""Refunds (SPEC §11.4): a phase submission stops counting against its team's limits when
it failed through no fault of the participant. Each is written where its transition is, in
the same transaction, through the hooks the lower apps call:

- `cancelled` — its job was cancelled before grading started, and it was never graded (a
  cancelled regrade refunds nothing) (`apps.jobs.cancel_hooks`);
- `worker_lost` — the worker was lost `GRADING_MAX_ATTEMPTS` times (`apps.grading.fault_hooks`);
- `scoring_failed` — the scorer failed, or the platform could not run it (the grader refused
  or raised): recorded with the result (`entry_outcome_record`).

A participant's own failure (crash, timeout, a limit, `no_predictions`,
`invalid_predictions`) is never refunded. A refund is one conditional UPDATE of a counted
entry: idempotent, and counted once in the metrics. An entry that still holds scores of an
earlier grading has its team's leaderboard rows rebuilt (`team_best_refresh`, which locks the
team row: after the submission's, as everywhere).
"""

from __future__ import annotations

from apps.benchmarks.metrics import phase_refunded_on_commit
from apps.benchmarks.models import Entry, Score
from apps.benchmarks.services.team_best import team_best_refresh

CANCELLED = "cancelled"
WORKER_LOST = "worker_lost"
SCORING_FAILED = "scoring_failed"


def entry_refund(*, submission_id: str, reason: str) -> bool:
    """Stop counting the submission's entry (`counted=False`, `refund_reason`); False when it
    is not a counted phase entry. Call inside the transition's transaction."""
    refunded = (
        Entry.objects.filter(submission_id=submission_id, counted=True).update(
            counted=False, refund_reason=reason
        )
        == 1
    )
    if refunded:
        phase_refunded_on_commit(reason=reason)
        entry = Entry.objects.filter(pk=submission_id).values("phase_id", "team_id").first()
        if entry is not None and Score.objects.filter(entry_id=submission_id).exists():
            # Scores of an earlier grading (a regrade): the team's rows must forget them.
            team_best_refresh(phase_id=entry["phase_id"], team_id=entry["team_id"])
    return refunded


def entry_refund_on_cancel(*, submission_id: str, started: bool) -> None:
    """The jobs app's cancel hook: refunded only when grading had not started, and only for a
    submission never graded before. A cancelled regrade leaves the earlier outcome standing:
    its owner has seen the scores (or the failure), so cancelling must not buy the slot back."""
    if not started and not _graded_before(submission_id):
        entry_refund(submission_id=submission_id, reason=CANCELLED)


def _graded_before(submission_id: str) -> bool:
    return (
        Score.objects.filter(entry_id=submission_id).exists()
        or Entry.objects.filter(pk=submission_id).exclude(failure="").exists()
    )


def entry_refund_on_fault(*, submission_id: str, fault: str) -> None:
    """The grading app's platform-fault hook (`worker_lost`)."""
    entry_refund(submission_id=submission_id, reason=fault)
