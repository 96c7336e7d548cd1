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

import dataclasses
import functools
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
    input_folder,
    input_folder_hand_over,
    isolation_probe,
)
from apps.grading.phase_grader import phase_grade
from apps.grading.phase_results import phase_invalid, phase_scoring_failed
from apps.grading.phases import phase_plan_get
from apps.grading.results import GradingResult as GradingResult  # the Grader protocol's
from apps.grading.results import result_from_stages
from apps.grading.stages import (
    BubblewrapBackend,
    StageBackend,
    StageSpec,
    UnisolatedBackend,
    pipeline_run,
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
    the settings and the database drivers are importable. Checked once per process and
    settings, as the probe is (a rescore asks before every item)."""
    readonly = tuple(str(p) for p in settings.GRADING_READONLY_PATHS)
    return _interpreter_problem(python, readonly, str(settings.BASE_DIR))


@functools.lru_cache(maxsize=8)
def _interpreter_problem(python: str, readonly: tuple[str, ...], base_dir: str) -> str | None:
    real = os.path.realpath(python)
    platform = [os.path.realpath(base_dir), os.path.realpath(sys.prefix)]
    for folder in (os.path.realpath(p) for p in readonly):
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


def stage_backend(isolation: Isolation) -> StageBackend:
    """The backend that runs stages with the isolation in force."""
    python = str(settings.GRADING_PYTHON)
    if isolation.isolation == BUBBLEWRAP and isolation.bwrap is not None:
        readonly = tuple(str(p) for p in settings.GRADING_READONLY_PATHS)
        return BubblewrapBackend(bwrap=isolation.bwrap, python=python, readonly_paths=readonly)
    return UnisolatedBackend(python=python)


class SandboxGrader:
    """The default grader: a one-stage pipeline (`apps.grading.stages`), the submission's
    program in a bubblewrap sandbox under the limits of `grading_limits()` (see the module
    docstring and `apps.grading.isolation`); a phase submission's two stages
    (`apps.grading.phase_grader`) when the phase provider has a scoring plan for it."""

    name = "sandbox"

    def grade(self, request: GradingRequest) -> GradingResult:
        isolation = grading_isolation()
        plan = phase_plan_get(submission_id=request.submission_id)
        if not isolation.allowed:
            if plan is not None:  # the platform's fault: hosts read why
                return phase_scoring_failed(plan, isolation.reason, logs="")
            return GradingResult(outcome="failed", reason=isolation.reason)
        limits = grading_limits()
        on_output = request.on_output
        with input_folder() as root:
            try:
                scratch_prepare(request.files, root)
            except ArchiveError as exc:
                if plan is not None:
                    return phase_invalid(plan, str(exc))
                return GradingResult(outcome="failed", reason=str(exc))
            if plan is not None:
                return phase_grade(
                    plan,
                    root=root,
                    entrypoint=request.entrypoint,
                    config_file=request.config_file,
                    backend=stage_backend(isolation),
                    limits=limits,
                    on_output=on_output,
                )
            entry = root / request.entrypoint
            if not entry.is_file() or entry.is_symlink():
                return GradingResult(
                    outcome="failed", reason=f"Entrypoint {request.entrypoint!r} not found."
                )
            input_folder_hand_over(root, isolation=isolation.isolation)
            run = StageSpec(
                name="run",
                program=(request.entrypoint, request.config_file),
                files=root,
                limits=limits,
            )
            outcomes = pipeline_run(
                [run],
                backend=stage_backend(isolation),
                on_logs=None if on_output is None else lambda _stage, logs: on_output(logs),
            )
        result = result_from_stages(outcomes, timeout=limits.wall_seconds)
        if isolation.isolation == NONE:
            return dataclasses.replace(
                result,
                logs="[yoyaku] WARNING: graded WITHOUT isolation. "
                f"{isolation.reason}\n{result.logs}",
            )
        return result


# The name of the default grader before isolation; `GRADER` settings that name it keep working.
SubprocessGrader = SandboxGrader
