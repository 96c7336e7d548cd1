"""What a grading's stages mean for its submission: the one place a `GradingResult` is made
from stage outcomes and `metrics.json` (SPEC §5, §10), and the one check of any grader's result
before it is written.

A result's `outcome` is the submission's next status: `completed`, `review_pending` or
`failed`, with the reason the submitter reads.
"""

from __future__ import annotations

import json
import math
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from apps.grading.phases import PhaseOutcome
from apps.grading.stages import StageOutcome
from apps.submissions.models import SubmissionStatus

# The statuses a grading may leave a submission in.
OUTCOMES = (
    SubmissionStatus.COMPLETED.value,
    SubmissionStatus.REVIEW_PENDING.value,
    SubmissionStatus.FAILED.value,
)


@dataclass(frozen=True)
class GradingResult:
    """`outcome` is the submission's next status: completed, review_pending or failed.
    `phase`: a phase submission's scores or scoring failure, written with the result."""

    outcome: str
    score: float | None = None
    reason: str = ""
    logs: str = ""
    exit_code: int | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    phase: PhaseOutcome | None = None


def result_checked(result: GradingResult) -> GradingResult:
    """Any grader's result as it may be written: an outcome that is not a submission's final
    status fails the attempt (a grader of the `GRADER` setting is code of the operator's)."""
    if result.outcome in OUTCOMES:
        return result
    return GradingResult(
        outcome="failed",
        reason=f"The grader returned an unknown outcome {result.outcome!r}.",
        logs=result.logs,
    )


def result_from_stages(outcomes: Sequence[StageOutcome], *, timeout: float) -> GradingResult:
    """The submission's result from its pipeline's outcomes, in order: the first stage that
    failed decides (timeout, sandbox error, non-zero exit or fatal signal → `failed`);
    otherwise the last stage's result file is read as `metrics.json` (`result_from_metrics`).
    The logs are the first stage's: the participant's program."""
    if not outcomes:
        return GradingResult(outcome="failed", reason="No grading stage ran.")
    logs = outcomes[0].logs
    failed = next((outcome for outcome in outcomes if not outcome.ok), None)
    if failed is not None:
        return result_of_failed_stage(failed, logs=logs, timeout=timeout)
    last = outcomes[-1]
    if last.result_problem:
        return GradingResult(outcome="failed", reason=last.result_problem, logs=logs, exit_code=0)
    if last.result is None:
        return GradingResult(
            outcome="review_pending",
            reason="The program wrote no metrics.json; a reviewer must grade it.",
            logs=logs,
            exit_code=0,
        )
    try:
        metrics = json.loads(last.result)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return GradingResult(
            outcome="failed",
            reason=f"metrics.json is not valid JSON: {exc}",
            logs=logs,
            exit_code=0,
        )
    return result_from_metrics(metrics, logs=logs, exit_code=0)


def result_of_failed_stage(outcome: StageOutcome, *, logs: str, timeout: float) -> GradingResult:
    if outcome.timed_out:
        return GradingResult(
            outcome="failed",
            reason=f"Timed out after GRADING_TIMEOUT ({timeout:g} s); the program and "
            "everything it started were killed.",
            logs=logs,
        )
    if outcome.error:
        return GradingResult(
            outcome="failed", reason=outcome.error, logs=logs, exit_code=outcome.exit_code
        )
    code = outcome.exit_code if outcome.exit_code is not None else -1
    return GradingResult(
        outcome="failed",
        reason=f"The program failed: {describe_exit(code)}.",
        logs=logs,
        exit_code=code,
    )


def result_from_metrics(
    metrics: Any, *, logs: str = "", exit_code: int | None = 0
) -> GradingResult:
    """Interpret a finished program's `metrics.json` (already parsed) as SPEC §5 and §10 say.

    A finite numeric `score` within GRADING_SCORE_MIN..GRADING_SCORE_MAX and no `needs_review:
    true` → completed; `needs_review: true`, no usable score or one out of range →
    review_pending with the reason (a human decides).
    """
    if not isinstance(metrics, dict):
        return GradingResult(
            outcome="review_pending",
            reason="metrics.json is not a JSON object; a reviewer must grade it.",
            logs=logs,
            exit_code=exit_code,
        )
    raw = metrics.get("score")
    score: float | None = None
    problem = ""
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        try:
            value = float(raw)
        except OverflowError:  # an integer too large for a float
            value = math.inf
        if not math.isfinite(value):
            problem = "metrics.json has a score that is not a finite number"
        elif not _score_in_range(value):
            problem = (
                f"metrics.json has a score of {value:g}, outside GRADING_SCORE_MIN.."
                f"GRADING_SCORE_MAX ({_range_text()})"
            )
        else:
            score = value
    if metrics.get("needs_review") is True:
        return GradingResult(
            outcome="review_pending",
            score=score,
            reason="The program asked for a human review.",
            logs=logs,
            exit_code=exit_code,
            metrics=metrics,
        )
    if score is None:
        return GradingResult(
            outcome="review_pending",
            reason=(problem or "metrics.json has no numeric score") + "; a reviewer must grade it.",
            logs=logs,
            exit_code=exit_code,
            metrics=metrics,
        )
    return GradingResult(
        outcome="completed", score=score, logs=logs, exit_code=exit_code, metrics=metrics
    )


def _score_in_range(value: float) -> bool:
    low, high = settings.GRADING_SCORE_MIN, settings.GRADING_SCORE_MAX
    return (low is None or value >= float(low)) and (high is None or value <= float(high))


def _range_text() -> str:
    low, high = settings.GRADING_SCORE_MIN, settings.GRADING_SCORE_MAX
    return f"{'-inf' if low is None else low} .. {'inf' if high is None else high}"


def describe_exit(code: int) -> str:
    if code >= 0:
        return f"exit code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    hints = {
        "SIGXCPU": " (CPU time limit reached)",
        "SIGXFSZ": " (file size limit reached)",
        "SIGKILL": " (killed)",
        "SIGSEGV": " (crashed, possibly out of memory)",
    }
    return f"killed by {name}{hints.get(name, '')}"
