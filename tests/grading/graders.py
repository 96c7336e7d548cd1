"""Graders for tests: they record every invocation in a file shared across processes."""

from __future__ import annotations

import os
import time
from pathlib import Path

from apps.grading.grader import GradingRequest, GradingResult


def invocations(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [line for line in path.read_text().splitlines() if line]


class RecordingGrader:
    """Appends `<submission_id>` to $YOYAKU_TEST_GRADER_LOG, sleeps `config.sleep`, then
    returns `config.outcome` (default completed) with `config.score` (default 1.0)."""

    def grade(self, request: GradingRequest) -> GradingResult:
        log = os.environ.get("YOYAKU_TEST_GRADER_LOG")
        if log:
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, f"{request.submission_id}\n".encode())
            finally:
                os.close(fd)
        time.sleep(float(request.config.get("sleep", 0)))
        return GradingResult(
            outcome=str(request.config.get("outcome", "completed")),
            score=float(request.config.get("score", 1.0)),
            logs="recorded\n",
            exit_code=0,
        )


class RaisingGrader:
    def grade(self, request: GradingRequest) -> GradingResult:
        raise RuntimeError("grader infrastructure is down")
