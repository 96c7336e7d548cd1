from __future__ import annotations

import os
import secrets
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from tests.grading.workers import Grade


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


@pytest.fixture
def canary(monkeypatch: pytest.MonkeyPatch) -> str:
    """A secret in the worker's environment, the way SECRET_KEY and DATABASE_URL are."""
    value = "canary-" + secrets.token_hex(16)
    monkeypatch.setenv("YOYAKU_TEST_SECRET", value)
    return value


@pytest.fixture(params=["root-worker", "unprivileged-worker"])
def grade(request: pytest.FixtureRequest, user: User, canary: str) -> Grade:
    """Grades a program as a root worker (`grade_job`) or as an unprivileged one (the isolation
    package's command as another uid): `grade(program, config) -> (status, logs)`."""
    from tests.grading.workers import grade_as_root_worker, grade_as_unprivileged_worker

    if request.param == "root-worker":
        if os.geteuid() != 0:
            pytest.skip("this process is not root")
        return lambda program, config=None: grade_as_root_worker(user, program, config or {})
    if os.geteuid() != 0:
        pytest.skip("switching to another uid needs root")
    return lambda program, config=None: grade_as_unprivileged_worker(program, config or {})
