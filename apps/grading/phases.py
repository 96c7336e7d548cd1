"""Phase submissions as the grading app sees them: a scoring plan in, a phase outcome out.

Grading knows nothing of challenges. The benchmarks app registers one `PhaseProvider` (from
`apps/benchmarks/registry.py`) that, given a submission id, answers the phase's `ScoringPlan`
(None for a question or skill submission, graded as before), and records a `PhaseOutcome`
(scores, the scoring failure's code, the scorer's logs for hosts) inside the transaction that
writes the submission's result under its lease (`apps.grading.leases.grading_result_record`),
so that the submission's status and its scores commit together or not at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

PREDICTIONS = "predictions"
CODE = "code"

# `PhaseOutcome.failure`: why a phase submission failed scoring ("" when it was scored).
NO_PREDICTIONS = "no_predictions"
INVALID_PREDICTIONS = "invalid_predictions"
SCORING_FAILED = "scoring_failed"


@dataclass(frozen=True)
class BundleFolder:
    """A folder of a stored bundle: the zip's storage name, the folder inside it (ending in
    "/"), and the folder's digest (what the local cache is keyed by)."""

    bundle_file: str
    folder: str
    digest: str


@dataclass(frozen=True)
class ScoringPlan:
    """How a phase submission is graded: the phase's kind, the scoring version whose program
    and reference data score it, the declared splits and metrics every score must hold, and
    the phase's resources (None: the GRADING_* maximum)."""

    kind: str
    version: int
    scoring_program: BundleFolder
    scoring_entrypoint: str
    reference_data: BundleFolder
    splits: tuple[str, ...]
    metrics: tuple[str, ...]
    input_data: BundleFolder | None = None
    timeout_seconds: int | None = None
    memory_mb: int | None = None
    # Code phases: the storage folder the run stage's predictions are kept under, so that a
    # later scoring version scores them again without running the program (SPEC §11.6).
    keep_predictions_under: str = ""


@dataclass(frozen=True)
class PhaseOutcome:
    """What scoring gave: `scores` {split: {metric: value}} when scored, else `failure` (one of
    the codes above). `scoring_logs` is for hosts only: the scorer's output and the reason of
    a `scoring_failed`."""

    version: int
    failure: str = ""
    scores: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    scoring_logs: str = ""
    # The stored archive of a code phase's predictions (`keep_predictions_under`), if kept.
    kept_predictions: str = ""


class PhaseProvider(Protocol):
    def plan(self, *, submission_id: str) -> ScoringPlan | None: ...

    def record(self, *, submission_id: str, outcome: PhaseOutcome) -> None:
        """Write the outcome; called inside the result's transaction, under the lease."""
        ...


_providers: list[PhaseProvider] = []


def phase_provider_register(provider: PhaseProvider) -> None:
    """Register the phase provider (once per process; a second registration replaces it)."""
    _providers[:] = [provider]


def phase_plan_get(*, submission_id: str) -> ScoringPlan | None:
    """The submission's scoring plan, or None when it is not a phase submission."""
    for provider in _providers:
        plan = provider.plan(submission_id=submission_id)
        if plan is not None:
            return plan
    return None


def phase_outcome_record(*, submission_id: str, outcome: PhaseOutcome) -> None:
    """Hand the outcome to the provider; must run inside the result's transaction."""
    if not _providers:
        raise RuntimeError("A phase outcome was produced but no phase provider is registered.")
    _providers[0].record(submission_id=submission_id, outcome=outcome)
