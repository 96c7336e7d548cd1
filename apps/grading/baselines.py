"""Scoring a folder of a bundle (a phase's baseline) with stage 2 alone, for the benchmarks
app: the same sandbox, limits and outcome rules as a submission's score stage."""

from __future__ import annotations

from apps.core.archives import ArchiveError
from apps.grading.bundle_cache import bundle_folders_materialize
from apps.grading.grader import grading_isolation, grading_limits, stage_backend
from apps.grading.phase_grader import folder_score
from apps.grading.phase_results import phase_scoring_failed
from apps.grading.phases import BundleFolder, ScoringPlan
from apps.grading.results import GradingResult


def bundle_folder_score(*, plan: ScoringPlan, predictions: BundleFolder) -> GradingResult:
    """Run `plan`'s scoring program on the bundle folder `predictions` (extracted into the
    worker's cache, mounted read-only). Never raises for what the scorer does; the result's
    `phase` holds the scores or the scoring failure."""
    isolation = grading_isolation()
    if not isolation.allowed:
        return phase_scoring_failed(plan, isolation.reason, logs="")
    try:
        [folder] = bundle_folders_materialize([predictions])
    except (ArchiveError, OSError) as exc:
        return phase_scoring_failed(plan, f"the baseline folder cannot be read: {exc}", logs="")
    return folder_score(
        plan, predictions=folder, backend=stage_backend(isolation), limits=grading_limits()
    )
