"""Grading a phase submission (SPEC §11.2): two stages, each its own bubblewrap sandbox with
the phase's resources.

1. `run` (code phases): the participant's `python <entrypoint> <config_file>` with its own
   files as a read-only working folder, the phase's input data read-only at `/data`, and
   `/output` the only writable folder besides `/tmp`; `/output` is collected. Its logs are the
   job's logs, live and final.
2. `score` (every phase submission): the host's `scoring_entrypoint` in a copy of the scoring
   program folder, the predictions read-only at `/predictions` (what stage 1 collected, or the
   submission's files with archives unpacked), the reference data read-only at `/reference`,
   `/scores` writable; its result is `/scores/scores.json`. Its logs are for hosts only.

The reference data and the scoring program never enter stage 1's sandbox: they are mounted
only into stage 2's, which starts after stage 1's has ended and been torn down. What the
outcomes mean is `apps.grading.phase_results`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable
from pathlib import Path

from apps.core.archives import ArchiveError
from apps.grading.bundle_cache import bundle_folders_materialize
from apps.grading.isolation import BUBBLEWRAP, Limits, input_folder, input_folder_hand_over
from apps.grading.kept_predictions import predictions_keep
from apps.grading.phase_results import (
    phase_no_predictions,
    phase_result_from_score,
    phase_run_failed,
    phase_scoring_failed,
)
from apps.grading.phases import CODE, BundleFolder, PhaseOutcome, ScoringPlan
from apps.grading.results import GradingResult
from apps.grading.stages import StageBackend, StageOutcome, StageSpec

logger = logging.getLogger(__name__)

SCORES_FILE = "/scores/scores.json"


def phase_limits(plan: ScoringPlan, base: Limits) -> Limits:
    """The GRADING_* limits, lowered to the phase's `resources` where it names them."""
    wall = base.wall_seconds
    if plan.timeout_seconds:
        wall = min(wall, float(plan.timeout_seconds))
    memory = base.memory_bytes
    if plan.memory_mb:
        memory = min(memory, plan.memory_mb * 1024 * 1024)
    return dataclasses.replace(
        base, wall_seconds=wall, cpu_seconds=max(1, math.ceil(wall)), memory_bytes=memory
    )


@dataclasses.dataclass(frozen=True)
class PhaseFolders:
    program: Path
    reference: Path
    input_data: Path | None


def phase_folders(plan: ScoringPlan) -> PhaseFolders:
    """The plan's bundle folders on this host (extracted once per digest). Raises
    ArchiveError or OSError."""
    wanted: list[BundleFolder] = [plan.scoring_program, plan.reference_data]
    if plan.input_data is not None:
        wanted.append(plan.input_data)
    paths = bundle_folders_materialize(wanted)
    return PhaseFolders(paths[0], paths[1], paths[2] if len(paths) > 2 else None)


def score_stage_run(
    plan: ScoringPlan,
    *,
    predictions: Path,
    folders: PhaseFolders,
    backend: StageBackend,
    limits: Limits,
) -> StageOutcome:
    """Stage 2 on a folder of predictions readable by the sandbox's uid."""
    spec = StageSpec(
        name="score",
        program=(plan.scoring_entrypoint,),
        files=folders.program,
        limits=limits,
        mounts={"/predictions": predictions, "/reference": folders.reference},
        output="/scores",
        result=SCORES_FILE,
    )
    return backend.run(spec)


def folder_score(
    plan: ScoringPlan, *, predictions: Path, backend: StageBackend, limits: Limits
) -> GradingResult:
    """Stage 2 alone on a folder the sandbox's uid can read (a baseline): the result as for
    a submission."""
    limits = phase_limits(plan, limits)
    try:
        folders = phase_folders(plan)
    except (ArchiveError, OSError) as exc:
        return phase_scoring_failed(plan, f"the bundle's folders cannot be read: {exc}", logs="")
    score = score_stage_run(
        plan, predictions=predictions, folders=folders, backend=backend, limits=limits
    )
    return phase_result_from_score(plan, score, logs="", timeout=limits.wall_seconds)


def phase_grade(
    plan: ScoringPlan,
    *,
    root: Path,
    entrypoint: str,
    config_file: str,
    backend: StageBackend,
    limits: Limits,
    on_output: Callable[[str], None] | None,
) -> GradingResult:
    """Grade a phase submission whose files are prepared in `root` (archives unpacked)."""
    limits = phase_limits(plan, limits)
    if backend.name != BUBBLEWRAP:
        return phase_scoring_failed(
            plan, "phase scoring needs bubblewrap (fixed folders per stage)", logs=""
        )
    try:
        folders = phase_folders(plan)
    except (ArchiveError, OSError) as exc:
        logger.exception("grading: the bundle folders of a phase cannot be read")
        return phase_scoring_failed(plan, f"the bundle's folders cannot be read: {exc}", logs="")
    if plan.kind != CODE:
        input_folder_hand_over(root, isolation=BUBBLEWRAP)
        score = score_stage_run(
            plan, predictions=root, folders=folders, backend=backend, limits=limits
        )
        return phase_result_from_score(plan, score, logs="", timeout=limits.wall_seconds)
    entry = root / entrypoint
    if not entrypoint or not entry.is_file() or entry.is_symlink():
        return GradingResult(
            outcome="failed",
            reason=f"Entrypoint {entrypoint!r} not found.",
            phase=PhaseOutcome(version=plan.version),
        )
    input_folder_hand_over(root, isolation=BUBBLEWRAP)
    with input_folder() as predictions:
        run = backend.run(
            StageSpec(
                name="run",
                program=(entrypoint, config_file),
                files=root,
                limits=limits,
                mounts={} if folders.input_data is None else {"/data": folders.input_data},
                output="/output",
                result="/output/.yoyaku-unused",
                collect=predictions,
                readonly_work=True,
            ),
            on_logs=on_output,
        )
        if not run.ok:
            return phase_run_failed(plan, run, timeout=limits.wall_seconds)
        if not any(predictions.iterdir()):
            return phase_no_predictions(plan, logs=run.logs)
        kept = predictions_keep(plan, predictions)
        input_folder_hand_over(predictions, isolation=BUBBLEWRAP)
        score = score_stage_run(
            plan, predictions=predictions, folders=folders, backend=backend, limits=limits
        )
    result = phase_result_from_score(plan, score, logs=run.logs, timeout=limits.wall_seconds)
    if kept and result.phase is not None:
        result = dataclasses.replace(
            result, phase=dataclasses.replace(result.phase, kept_predictions=kept)
        )
    return result
