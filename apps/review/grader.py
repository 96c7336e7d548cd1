"""Graders: what runs a submission's program and turns its output into a result.

A grader is any class with `grade(request) -> GradingResult` (the `Grader` protocol); the
`GRADER` setting names the one to use by dotted path. The worker calls it outside any database
transaction and with no lock held. `SubprocessGrader` is the default: good for development and
for trusted programs. Production deployments that grade untrusted code should plug in a grader
that runs the same calling convention inside a container sandbox (gVisor, Firecracker, a
rootless container with no network) — the interface stays the same.

Calling convention: `python <entrypoint> <config_file>`, working directory = a scratch copy of
the submission's files (archives unpacked there), where the program writes `metrics.json`:
`{"score": number, "needs_review": bool, ...}`. The mechanics (scratch folder, safe unpacking,
the limited child process) are in `apps.review.sandbox`.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.conf import settings
from django.utils.module_loading import import_string

from apps.review.sandbox import (
    MAX_PROCESSES,
    Limits,
    SandboxError,
    describe_exit,
    read_metrics,
    run_sandboxed,
    sandbox_uid,
    scratch_dir,
    scratch_prepare,
    tasks_of_uid,
)
from apps.review.sandbox_zygote import run_in_zygote, zygote_warm

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


def result_from_metrics(
    metrics: Any, *, logs: str = "", exit_code: int | None = 0
) -> GradingResult:
    """Interpret a finished program's `metrics.json` (already parsed) as SPEC §5 says.

    A finite numeric `score` and no `needs_review: true` → completed; `needs_review: true` or
    no usable score → review_pending (a human decides).
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
    if isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw):
        score = float(raw)
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
            reason="metrics.json has no numeric score; a reviewer must grade it.",
            logs=logs,
            exit_code=exit_code,
            metrics=metrics,
        )
    return GradingResult(
        outcome="completed", score=score, logs=logs, exit_code=exit_code, metrics=metrics
    )


class SubprocessGrader:
    """The default grader: the program in a child process with rlimits (see module docstring).

    Limits: wall clock GRADING_TIMEOUT (the process group is SIGKILLed), RLIMIT_CPU the same,
    RLIMIT_AS GRADING_MEMORY_LIMIT, RLIMIT_FSIZE GRADING_MAX_UNPACKED_SIZE, RLIMIT_NPROC
    MAX_PROCESSES (under a root worker the program's real uid is `sandbox_uid()`, where the
    limit binds), captured output GRADING_MAX_OUTPUT.
    """

    name = "subprocess"

    def grade(self, request: GradingRequest) -> GradingResult:
        timeout = float(settings.GRADING_TIMEOUT)
        max_output = int(settings.GRADING_MAX_OUTPUT)
        as_root = os.geteuid() == 0
        drop_to = sandbox_uid() if as_root else None
        # A non-root worker shares its uid with the program: the budget comes on top of what
        # that uid already runs.
        processes = MAX_PROCESSES if as_root else MAX_PROCESSES + tasks_of_uid(os.getuid())
        limits = Limits(
            cpu_seconds=max(1, math.ceil(timeout)),
            memory_bytes=int(settings.GRADING_MEMORY_LIMIT),
            file_bytes=int(settings.GRADING_MAX_UNPACKED_SIZE),
            processes=processes,
            drop_to_uid=drop_to,
        )
        use_zygote = bool(settings.GRADING_ZYGOTE)
        if use_zygote:
            zygote_warm()  # boots while the files are copied
        with scratch_dir() as root:
            try:
                scratch_prepare(((f.filename, f.storage_name) for f in request.files), root)
            except SandboxError as exc:
                return GradingResult(outcome="failed", reason=str(exc))
            entry = root / request.entrypoint
            if not entry.is_file() or entry.is_symlink():
                return GradingResult(
                    outcome="failed", reason=f"Entrypoint {request.entrypoint!r} not found."
                )
            argv = [request.entrypoint, request.config_file]
            outcome = None
            if use_zygote:
                outcome = run_in_zygote(
                    argv, cwd=root, limits=limits, timeout=timeout, max_output=max_output
                )
            if outcome is None:
                outcome = run_sandboxed(
                    [sys.executable, *argv],
                    cwd=root,
                    limits=limits,
                    timeout=timeout,
                    max_output=max_output,
                )
            if outcome.timed_out:
                return GradingResult(
                    outcome="failed",
                    reason=f"Timed out after GRADING_TIMEOUT ({timeout:g} s); the program "
                    "and everything it started were killed.",
                    logs=outcome.logs,
                )
            if outcome.error:
                return GradingResult(outcome="failed", reason=outcome.error, logs=outcome.logs)
            code = outcome.exit_code if outcome.exit_code is not None else -1
            if code != 0:
                return GradingResult(
                    outcome="failed",
                    reason=f"The program failed: {describe_exit(code)}.",
                    logs=outcome.logs,
                    exit_code=code,
                )
            try:
                metrics = read_metrics(root)
            except SandboxError as exc:
                return GradingResult(
                    outcome="failed", reason=str(exc), logs=outcome.logs, exit_code=0
                )
            if metrics is None:
                return GradingResult(
                    outcome="review_pending",
                    reason="The program wrote no metrics.json; a reviewer must grade it.",
                    logs=outcome.logs,
                    exit_code=0,
                )
            return result_from_metrics(metrics, logs=outcome.logs, exit_code=0)
