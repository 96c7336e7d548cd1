from __future__ import annotations

import os
from typing import Any

import pytest


@pytest.fixture
def sandbox_settings(settings: Any) -> Any:
    """The default grader in bubblewrap with small limits. Skips where bubblewrap cannot run,
    unless YOYAKU_REQUIRE_BUBBLEWRAP is set (CI sets it: there, a skip would hide a hole)."""
    from apps.grading.grader import grading_isolation

    settings.GRADER = "apps.grading.grader.SandboxGrader"
    settings.DEBUG = False
    settings.GRADING_ALLOW_UNSANDBOXED = False
    settings.GRADING_TIMEOUT = 5
    settings.GRADING_MEMORY_LIMIT = 512 * 1024 * 1024
    settings.GRADING_MAX_OUTPUT = 64 * 1024
    settings.GRADING_MAX_UNPACKED_SIZE = 4 * 1024 * 1024
    settings.GRADING_SCRATCH_SIZE = 16 * 1024 * 1024
    isolation = grading_isolation()
    if isolation.isolation != "bubblewrap":
        if os.environ.get("YOYAKU_REQUIRE_BUBBLEWRAP"):
            pytest.fail(f"bubblewrap is required here: {isolation.reason}")
        pytest.skip(f"no bubblewrap isolation on this machine: {isolation.reason}")
    return settings
