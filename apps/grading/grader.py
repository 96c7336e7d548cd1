"""Graders: what runs a submission's program and turns its output into a result.

A grader is any class with `grade(request) -> GradingResult` (the `Grader` protocol); the
`GRADER` setting names the one to use by dotted path, so a container or microVM grader can be
plugged in. The worker calls it outside any database transaction and with no lock held.

`SandboxGrader`, the default, runs the program in a bubblewrap sandbox (`apps.grading.isolation`)
with `GRADING_PYTHON`, never the platform's interpreter. Calling convention (SPEC §5):
`python -E -s <entrypoint> <config_file>` in a scratch copy of the submission's files (archives
unpacked there), where the program writes `metrics.json`: `{"score": number, "needs_review":
bool, ...}`.

Where bubblewrap cannot run, the grader refuses to grade (the attempt fails with the reason)
unless the operator asked for unsandboxed grading by name (`GRADING_ALLOW_UNSANDBOXED=true`) or
`DEBUG` is on (a development machine); either way a warning is logged and `/healthz` says so.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings
from django.core.files.storage import default_storage
from django.utils.module_loading import import_string

from apps.core.archives import ArchiveError, Budget, archive_kind, member_target, unpack_archive
from apps.grading.isolation import (
    BUBBLEWRAP,
    NONE,
    Limits,
    Outcome,
    input_folder,
    input_folder_hand_over,
    isolation_probe,
    run_program,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GradingFile:
    filename: str
    storage_name: str


@dataclass(frozen=True)
class GradingRequest:
    submission_id: str
    job_id: str
    entrypoint: str
    config_file: str
    files: tuple[GradingFile, ...]
    config: dict[str, Any] = field(default_factory=dict)
    # Called with the program's output so far while it runs (live logs); a grader may ignore it.
    on_output: Callable[[str], None] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class GradingResult:
    """`outcome` is the submission's next status: completed, review_pending or failed."""

    outcome: str
    score: float | None = None
    reason: str = ""
    logs: str = ""
    exit_code: int | None = None
    metrics: dict[str, Any] = field(default_factory=dict)


class Grader(Protocol):
    def grade(self, request: GradingRequest) -> GradingResult: ...


def grader_get() -> Grader:
    """An instance of the grader named by the `GRADER` setting (read at call time)."""
    grader_class = import_string(settings.GRADER)
    grader: Grader = grader_class()
    return grader


# --- Isolation and limits in force ------------------------------------------------------------


@dataclass(frozen=True)
class Isolation:
    """What this process can do: `isolation` in force (`bubblewrap` or `none`), whether it may
    grade at all, and why not / why unsandboxed."""

    isolation: str
    allowed: bool
    reason: str = ""
    bwrap: str | None = None


def grading_isolation() -> Isolation:
    """The isolation this process grades with (probed once per process and settings)."""
    python = str(settings.GRADING_PYTHON)
    readonly = tuple(str(p) for p in settings.GRADING_READONLY_PATHS)
    problem = _platform_interpreter_problem(python)
    if problem:
        return Isolation(NONE, allowed=False, reason=problem)
    probe = isolation_probe(python, readonly)
    if probe.isolation == BUBBLEWRAP:
        return Isolation(BUBBLEWRAP, allowed=True, bwrap=probe.bwrap)
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        return Isolation(NONE, allowed=False, reason=probe.reason)
    if settings.GRADING_ALLOW_UNSANDBOXED:
        return Isolation(
            NONE,
            allowed=True,
            reason=f"{probe.reason} Grading unsandboxed: GRADING_ALLOW_UNSANDBOXED is set.",
        )
    if settings.DEBUG:
        return Isolation(
            NONE,
            allowed=True,
            reason=f"{probe.reason} Grading unsandboxed because DEBUG is on; submitted "
            "programs can read everything this worker can.",
        )
    return Isolation(
        NONE,
        allowed=False,
        reason=f"{probe.reason} This worker grades nothing without isolation (install "
        "bubblewrap, or set GRADING_ALLOW_UNSANDBOXED=true to accept the risk).",
    )


def _platform_interpreter_problem(python: str) -> str | None:
    """Refuse the platform's own interpreter or a folder of the project: inside them Django,
    the settings and the database drivers are importable."""
    real = os.path.realpath(python)
    platform = [os.path.realpath(settings.BASE_DIR), os.path.realpath(sys.prefix)]
    for folder in (os.path.realpath(p) for p in settings.GRADING_READONLY_PATHS):
        if any(Path(p).is_relative_to(folder) or Path(folder).is_relative_to(p) for p in platform):
            return f"GRADING_READONLY_PATHS entry {folder!r} holds the platform's own code."
    if any(Path(python).is_relative_to(p) or Path(real).is_relative_to(p) for p in platform[:1]):
        return f"GRADING_PYTHON {python!r} is inside the platform's folder."
    if sys.prefix != sys.base_prefix and Path(python).is_relative_to(sys.prefix):
        return f"GRADING_PYTHON {python!r} is the platform's own virtualenv."
    return None


def grading_limits() -> Limits:
    timeout = float(settings.GRADING_TIMEOUT)
    scratch = int(settings.GRADING_SCRATCH_SIZE)
    return Limits(
        wall_seconds=timeout,
        cpu_seconds=max(1, math.ceil(timeout)),
        memory_bytes=int(settings.GRADING_MEMORY_LIMIT),
        file_bytes=scratch,
        scratch_bytes=scratch,
        processes=int(settings.GRADING_MAX_PROCESSES),
        open_files=int(settings.GRADING_MAX_OPEN_FILES),
        output_bytes=int(settings.GRADING_MAX_OUTPUT),
    )


def grader_health() -> tuple[bool, dict[str, Any]]:
    """`/healthz`'s `grader`: the isolation and limits in force in this process. Unhealthy
    when gradings would be unsandboxed or refused with DEBUG off."""
    isolation = grading_isolation()
    body: dict[str, Any] = {
        "isolation": isolation.isolation,
        "grading": "allowed" if isolation.allowed else "refused",
        "python": str(settings.GRADING_PYTHON),
        "limits": grading_limits().as_dict(),
        # What enforces the memory and task limits: rlimits here (a delegated cgroup v2 is not
        # used; see docs/isolation.md).
        "enforced_by": {
            "memory_bytes": "RLIMIT_AS per process",
            "processes": "RLIMIT_NPROC in the sandbox's user namespace",
            "scratch_bytes": "tmpfs size",
        },
    }
    if isolation.reason:
        body["warning"] = isolation.reason
    healthy = isolation.isolation == BUBBLEWRAP or bool(settings.DEBUG)
    return healthy, body


def grader_startup_check() -> None:
    """Log, once at a worker's start, what it grades with: an error when it will refuse to
    grade, a warning when it grades unsandboxed."""
    isolation = grading_isolation()
    if not isolation.allowed:
        logger.error("grader: gradings will FAIL: %s", isolation.reason)
    elif isolation.isolation == NONE:
        logger.warning("grader: NO ISOLATION: %s", isolation.reason)
    else:
        logger.info("grader: bubblewrap isolation (%s)", isolation.bwrap)


# --- Results ----------------------------------------------------------------------------------


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
    import signal

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


def _result_from_outcome(outcome: Outcome, *, timeout: float) -> GradingResult:
    if outcome.timed_out:
        return GradingResult(
            outcome="failed",
            reason=f"Timed out after GRADING_TIMEOUT ({timeout:g} s); the program and "
            "everything it started were killed.",
            logs=outcome.logs,
        )
    if outcome.error:
        return GradingResult(
            outcome="failed", reason=outcome.error, logs=outcome.logs, exit_code=outcome.exit_code
        )
    code = outcome.exit_code if outcome.exit_code is not None else -1
    if code != 0:
        return GradingResult(
            outcome="failed",
            reason=f"The program failed: {describe_exit(code)}.",
            logs=outcome.logs,
            exit_code=code,
        )
    if outcome.metrics_problem:
        return GradingResult(
            outcome="failed", reason=outcome.metrics_problem, logs=outcome.logs, exit_code=0
        )
    if outcome.metrics is None:
        return GradingResult(
            outcome="review_pending",
            reason="The program wrote no metrics.json; a reviewer must grade it.",
            logs=outcome.logs,
            exit_code=0,
        )
    try:
        metrics = json.loads(outcome.metrics)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return GradingResult(
            outcome="failed",
            reason=f"metrics.json is not valid JSON: {exc}",
            logs=outcome.logs,
            exit_code=0,
        )
    return result_from_metrics(metrics, logs=outcome.logs, exit_code=0)


# --- The default grader -----------------------------------------------------------------------


def scratch_prepare(files: tuple[GradingFile, ...], root: Path) -> None:
    """Copy the submission's files from storage into `root` and unpack its archives there,
    with the upload's archive rules; everything written counts against
    GRADING_MAX_UNPACKED_SIZE, and the archives together create at most MAX_ARCHIVE_MEMBERS
    files and folders (counted as they are created). Raises ArchiveError."""
    budget = Budget(int(settings.GRADING_MAX_UNPACKED_SIZE))
    archives: list[Path] = []
    for file in files:
        target = member_target(root, file.filename)
        if target.parent != root:
            raise ArchiveError(f"Unsafe file name {file.filename!r}.", kind="unsafe")
        with default_storage.open(file.storage_name, "rb") as source:
            budget.copy(source, target)
        if archive_kind(file.filename) is not None:
            archives.append(target)
    budget.entries_cap(int(settings.MAX_ARCHIVE_MEMBERS))
    for archive in archives:
        unpack_archive(archive, root, budget=budget, max_members=int(settings.MAX_ARCHIVE_MEMBERS))


class SandboxGrader:
    """The default grader: the program in a bubblewrap sandbox under the limits of
    `grading_limits()` (see the module docstring and `apps.grading.isolation`)."""

    name = "sandbox"

    def grade(self, request: GradingRequest) -> GradingResult:
        isolation = grading_isolation()
        if not isolation.allowed:
            return GradingResult(outcome="failed", reason=isolation.reason)
        limits = grading_limits()
        with input_folder() as root:
            try:
                scratch_prepare(request.files, root)
            except ArchiveError as exc:
                return GradingResult(outcome="failed", reason=str(exc))
            entry = root / request.entrypoint
            if not entry.is_file() or entry.is_symlink():
                return GradingResult(
                    outcome="failed", reason=f"Entrypoint {request.entrypoint!r} not found."
                )
            input_folder_hand_over(root, isolation=isolation.isolation)
            outcome = run_program(
                isolation=isolation.isolation,
                bwrap=isolation.bwrap,
                input_dir=root,
                program=[request.entrypoint, request.config_file],
                limits=limits,
                python=str(settings.GRADING_PYTHON),
                readonly_paths=tuple(str(p) for p in settings.GRADING_READONLY_PATHS),
                on_output=request.on_output,
            )
        result = _result_from_outcome(outcome, timeout=limits.wall_seconds)
        if isolation.isolation == NONE:
            return GradingResult(
                outcome=result.outcome,
                score=result.score,
                reason=result.reason,
                logs="[yoyaku] WARNING: graded WITHOUT isolation. "
                f"{isolation.reason}\n{result.logs}",
                exit_code=result.exit_code,
                metrics=result.metrics,
            )
        return result


# The name of the default grader before isolation; `GRADER` settings that name it keep working.
SubprocessGrader = SandboxGrader
