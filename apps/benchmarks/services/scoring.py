"""Scoring phase submissions and baselines (SPEC §11.2): the phase provider the grading app
calls through `apps.grading.phases` (registered in `apps/benchmarks/registry.py`), and the
baseline task's service.

- `entry_scoring_plan`: a submission's scoring plan: its phase's kind, input data, current
  scoring version (program, entrypoint, reference data), declared splits and metrics, and
  resources; None when the submission is not a phase's.
- `entry_outcome_record`: the entry's scores (`entry_scores_record`), `failure` and
  `scoring_logs`, written inside the grading result's transaction under the lease, so the
  submission's status and its scores commit together; one score per entry, version and split
  is a database constraint.
- `baselines_score_enqueue` / `baseline_score`: after a bundle is applied, one task per
  baseline without a score in its phase's current version runs stage 2 on the baseline's
  folder. Idempotent: a baseline already scored in that version is left alone.
"""

from __future__ import annotations

import dataclasses
import logging

from django.db import IntegrityError, transaction

from apps.benchmarks.models import (
    Baseline,
    Challenge,
    Entry,
    Phase,
    PhaseKind,
    Score,
    ScoringVersion,
)
from apps.benchmarks.services.refunds import entry_refund
from apps.benchmarks.services.rescores import rescore_entry_add
from apps.benchmarks.services.scores import baseline_scores_record, entry_scores_record
from apps.core.queue import BASELINE_SCORE, enqueue_on_commit
from apps.grading.baselines import bundle_folder_score
from apps.grading.phases import SCORING_FAILED, BundleFolder, PhaseOutcome, ScoringPlan

logger = logging.getLogger(__name__)

# Storage folder of code phases' kept predictions: <prefix>/<challenge id>/<submission id>/.
KEPT_PREFIX = "kept-predictions"


def phase_scoring_plan(
    phase: Phase, *, bundle_file: str, version_number: int | None = None
) -> ScoringPlan:
    """The plan of `phase`'s scoring version `version_number` (default: the one it serves);
    `bundle_file` holds its input data."""
    number = phase.scoring_version if version_number is None else version_number
    version = ScoringVersion.objects.get(phase=phase, number=number)
    input_data = None
    if phase.input_data:
        input_data = BundleFolder(bundle_file, phase.input_data, phase.input_data_digest)
    return ScoringPlan(
        kind=phase.kind,
        version=version.number,
        scoring_program=BundleFolder(
            version.bundle_file, version.scoring_program, version.scoring_program_digest
        ),
        scoring_entrypoint=version.scoring_entrypoint,
        reference_data=BundleFolder(
            version.bundle_file, version.reference_data, version.reference_data_digest
        ),
        splits=tuple(phase.splits.order_by("order").values_list("name", flat=True)),
        metrics=tuple(phase.metrics.order_by("order").values_list("key", flat=True)),
        input_data=input_data,
        timeout_seconds=phase.timeout_seconds,
        memory_mb=phase.memory_mb,
    )


def entry_scoring_plan(*, submission_id: str) -> ScoringPlan | None:
    entry = (
        Entry.objects.select_related("phase", "phase__challenge")
        .filter(submission_id=submission_id)
        .first()
    )
    if entry is None:
        return None
    plan = phase_scoring_plan(entry.phase, bundle_file=entry.phase.challenge.bundle_file)
    if plan.kind == PhaseKind.CODE:  # its predictions are kept for later versions (§11.6)
        keep = f"{KEPT_PREFIX}/{entry.phase.challenge_id}/{submission_id}/"
        plan = dataclasses.replace(plan, keep_predictions_under=keep)
    return plan


def entry_outcome_record(*, submission_id: str, outcome: PhaseOutcome) -> None:
    """Write a phase outcome; runs inside the grading result's transaction (the caller holds
    the submission's lease through its compare-and-set). Raises IntegrityError if the entry
    was already scored in this version (which the lease makes impossible)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("entry_outcome_record runs inside the result's transaction")
    entry = Entry.objects.select_related("phase", "submission").get(submission_id=submission_id)
    Entry.objects.filter(pk=entry.pk).update(
        failure=outcome.failure,
        scoring_logs=outcome.scoring_logs,
        kept_predictions=outcome.kept_predictions,
    )
    if not outcome.failure and outcome.scores:
        entry_scores_record(entry=entry, version=outcome.version, splits=outcome.scores)
        if entry.counted:  # graded in an older version while a newer one is scored
            rescore_entry_add(entry=entry, version=outcome.version)
    if outcome.failure == SCORING_FAILED:  # the platform's fault: refunded (SPEC §11.4)
        entry_refund(submission_id=submission_id, reason=SCORING_FAILED)


class EntryPhaseProvider:
    """The benchmarks app's `apps.grading.phases.PhaseProvider`."""

    def plan(self, *, submission_id: str) -> ScoringPlan | None:
        return entry_scoring_plan(submission_id=submission_id)

    def record(self, *, submission_id: str, outcome: PhaseOutcome) -> None:
        entry_outcome_record(submission_id=submission_id, outcome=outcome)


def baselines_score_enqueue(*, challenge: Challenge) -> int:
    """After the current transaction commits, one scoring task per baseline of `challenge`
    without a score in its phase's current version. Returns how many were enqueued."""
    count = 0
    for baseline in Baseline.objects.filter(phase__challenge=challenge).select_related("phase"):
        scored = Score.objects.filter(
            baseline=baseline, version=baseline.phase.scoring_version
        ).exists()
        if not scored:
            enqueue_on_commit(BASELINE_SCORE, baseline.pk)
            count += 1
    return count


def baseline_score(*, baseline_id: int) -> str:
    """Score the baseline in its phase's current version, once: `scored`, `already_scored`,
    `gone` (deleted since), or `failed` (logged with the scorer's account for hosts).
    Idempotent under redelivery and concurrent deliveries (the scores are written with
    update-or-create under the one-score-per-version constraint). No transaction is held
    while the scorer runs."""
    baseline = (
        Baseline.objects.select_related("phase", "phase__challenge").filter(pk=baseline_id).first()
    )
    if baseline is None:
        return "gone"
    phase = baseline.phase
    if Score.objects.filter(baseline=baseline, version=phase.scoring_version).exists():
        return "already_scored"
    bundle_file = phase.challenge.bundle_file
    plan = phase_scoring_plan(phase, bundle_file=bundle_file)
    folder = BundleFolder(bundle_file, baseline.folder, baseline.digest)
    result = bundle_folder_score(plan=plan, predictions=folder)
    outcome = result.phase
    if outcome is None or outcome.failure or not outcome.scores:
        logger.warning(
            "benchmarks: baseline %s of phase %s was not scored: %s",
            baseline.folder,
            phase.pk,
            outcome.scoring_logs if outcome is not None else result.reason,
        )
        return "failed"
    try:
        with transaction.atomic():
            if not Baseline.objects.filter(pk=baseline.pk, digest=baseline.digest).exists():
                return "gone"  # changed or removed by a newer bundle while it was scored
            baseline_scores_record(baseline=baseline, version=plan.version, splits=outcome.scores)
    except IntegrityError:
        return "already_scored"
    return "scored"
