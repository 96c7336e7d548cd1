"""What a phase submission's stages mean (SPEC §11.2): the one place a phase's `GradingResult`
is made. A sibling of `apps.grading.results`, whose rules for a failed run stage it reuses.

- The run stage failed (timeout, crash, limit): as any grading, the participant's fault.
- The run stage left `/output` empty: `failed`, `no_predictions`; the scorer does not run.
- The scorer wrote `{"invalid": "<message>"}`: `failed`, `invalid_predictions`, the host's
  message shown to the participant.
- Anything else but every declared metric of every declared split as a finite number (a
  crash, a timeout, bad JSON, NaN, a missing split or metric): `failed`, `scoring_failed`.
  The participant reads `SCORING_FAILED_REASON` and never the scorer's output; hosts read the
  reason and the scorer's logs in the entry's `scoring_logs`.
- Otherwise `completed` with the scores; the submission's own `score` stays empty.

The job's logs (what the participant reads) are the run stage's only.
"""

from __future__ import annotations

import json
import math
from typing import Any

from apps.grading.phases import (
    INVALID_PREDICTIONS,
    NO_PREDICTIONS,
    SCORING_FAILED,
    PhaseOutcome,
    ScoringPlan,
)
from apps.grading.results import GradingResult, describe_exit, result_of_failed_stage
from apps.grading.stages import StageOutcome

SCORING_FAILED_REASON = "The scoring program failed; the hosts have been told."
NO_PREDICTIONS_REASON = "The program left /output empty: there are no predictions to score."
# The longest host message for invalid predictions shown to the participant.
MAX_INVALID_MESSAGE = 2000


def phase_run_failed(plan: ScoringPlan, run: StageOutcome, *, timeout: float) -> GradingResult:
    """The run stage did not end well: failed as any grading (the participant's program)."""
    result = result_of_failed_stage(run, logs=run.logs, timeout=timeout)
    return GradingResult(
        outcome="failed",
        reason=result.reason,
        logs=run.logs,
        exit_code=result.exit_code,
        phase=PhaseOutcome(version=plan.version),
    )


def storable_text(text: str) -> str:
    """`text` as every database stores it and every answer renders it: NUL (which PostgreSQL
    refuses) and lone surrogates (which no UTF-8 encoder takes; JSON's `\\ud800` makes them)
    become U+FFFD. A scorer may quote a participant's bytes in its message."""
    return "".join(
        "\ufffd" if char == "\x00" or "\ud800" <= char <= "\udfff" else char for char in text
    )


def phase_invalid(plan: ScoringPlan, message: str, *, logs: str = "") -> GradingResult:
    """The predictions cannot be judged (the participant's fault), `message` shown to them
    (NUL and lone surrogates replaced)."""
    return GradingResult(
        outcome="failed",
        reason=f"The predictions are invalid: {storable_text(message[:MAX_INVALID_MESSAGE])}",
        logs=logs,
        phase=PhaseOutcome(version=plan.version, failure=INVALID_PREDICTIONS),
    )


def phase_no_predictions(plan: ScoringPlan, *, logs: str) -> GradingResult:
    return GradingResult(
        outcome="failed",
        reason=NO_PREDICTIONS_REASON,
        logs=logs,
        exit_code=0,
        phase=PhaseOutcome(version=plan.version, failure=NO_PREDICTIONS),
    )


def phase_scoring_failed(
    plan: ScoringPlan, why: str, *, logs: str, scorer_logs: str = ""
) -> GradingResult:
    """A platform fault: the participant reads the generic reason, hosts read `why` and the
    scorer's logs."""
    return GradingResult(
        outcome="failed",
        reason=SCORING_FAILED_REASON,
        logs=logs,
        phase=PhaseOutcome(
            version=plan.version,
            failure=SCORING_FAILED,
            scoring_logs=f"[yoyaku] scoring failed: {why}\n{scorer_logs}",
        ),
    )


def phase_result_from_score(
    plan: ScoringPlan, score: StageOutcome, *, logs: str, timeout: float
) -> GradingResult:
    """The submission's result from the score stage's outcome (`logs`: the run stage's)."""
    why = _scorer_problem(score, timeout=timeout)
    if why:
        return phase_scoring_failed(plan, why, logs=logs, scorer_logs=score.logs)
    try:
        document = json.loads(score.result or b"")
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return phase_scoring_failed(
            plan, f"scores.json is not valid JSON: {exc}", logs=logs, scorer_logs=score.logs
        )
    if isinstance(document, dict) and "invalid" in document:
        message = document["invalid"]
        result = phase_invalid(plan, str(message), logs=logs)
        return _with_scorer_logs(result, score.logs)
    scores, why = scores_checked(plan, document)
    if why:
        return phase_scoring_failed(plan, why, logs=logs, scorer_logs=score.logs)
    return GradingResult(
        outcome="completed",
        logs=logs,
        exit_code=0,
        phase=PhaseOutcome(version=plan.version, scores=scores, scoring_logs=score.logs),
    )


def _with_scorer_logs(result: GradingResult, scorer_logs: str) -> GradingResult:
    phase = result.phase
    assert phase is not None  # noqa: S101 - made just above
    return GradingResult(
        outcome=result.outcome,
        reason=result.reason,
        logs=result.logs,
        exit_code=result.exit_code,
        phase=PhaseOutcome(
            version=phase.version,
            failure=phase.failure,
            scores=phase.scores,
            scoring_logs=scorer_logs,
        ),
    )


def _scorer_problem(score: StageOutcome, *, timeout: float) -> str:
    if score.timed_out:
        return f"the scoring program timed out after {timeout:g} s"
    if score.error:
        return score.error
    if score.exit_code != 0:
        return f"the scoring program failed: {describe_exit(score.exit_code or -1)}"
    if score.result_problem:
        return score.result_problem
    if score.result is None:
        return "the scoring program wrote no /scores/scores.json"
    return ""


def scores_checked(plan: ScoringPlan, document: Any) -> tuple[dict[str, dict[str, float]], str]:
    """The declared splits' declared metrics from a parsed scores.json, or the problem: every
    one must be there as a finite number (other keys are ignored)."""
    if not isinstance(document, dict):
        return {}, "scores.json is not a JSON object"
    scores: dict[str, dict[str, float]] = {}
    for split in plan.splits:
        values = document.get(split)
        if not isinstance(values, dict):
            return {}, f"scores.json has no split {split!r}"
        kept: dict[str, float] = {}
        for metric in plan.metrics:
            raw = values.get(metric)
            if not isinstance(raw, int | float) or isinstance(raw, bool):
                return {}, f"scores.json has no number for {split}.{metric}"
            try:
                value = float(raw)
            except OverflowError:
                value = math.inf
            if not math.isfinite(value):
                return {}, f"{split}.{metric} is not a finite number"
            kept[metric] = value
        scores[split] = kept
    return scores, ""
