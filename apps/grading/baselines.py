"""Stage 2 alone, for the benchmarks app: on a folder of a bundle (a phase's baseline) or on a
submission's kept predictions (a rescore); the same sandbox, limits and outcome rules as a
submission's score stage."""

from __future__ import annotations

from apps.core.archives import ArchiveError
from apps.grading.bundle_cache import bundle_folders_materialize
from apps.grading.grader import (
    GradingFile,
    grading_isolation,
    grading_limits,
    scratch_prepare,
    stage_backend,
)
from apps.grading.isolation import input_folder, input_folder_hand_over
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


def kept_predictions_score(
    *, plan: ScoringPlan, files: tuple[GradingFile, ...], kept_archive: str = ""
) -> GradingResult:
    """Stage 2 alone (a rescore, SPEC §11.6) on a phase submission's kept predictions: its
    files (a predictions phase, archives unpacked as for its grading) or the stored archive of
    what its run stage left in `/output` (a code phase, `kept_archive` among `files`). Never
    raises for what the scorer does; a platform problem is a `scoring_failed` outcome."""
    isolation = grading_isolation()
    if not isolation.allowed:
        return phase_scoring_failed(plan, isolation.reason, logs="")
    with input_folder() as root:
        try:
            scratch_prepare(files, root)
        except (ArchiveError, OSError) as exc:
            return phase_scoring_failed(
                plan, f"the kept predictions cannot be read: {exc}", logs=""
            )
        if kept_archive:
            (root / kept_archive).unlink(missing_ok=True)
        input_folder_hand_over(root, isolation=isolation.isolation)
        return folder_score(
            plan, predictions=root, backend=stage_backend(isolation), limits=grading_limits()
        )
