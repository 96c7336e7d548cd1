from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tests.factories import make_user


@pytest.fixture
def reviewer(db: None) -> User:
    return make_user(username="rita", reviewer=True)


@pytest.fixture
def other_reviewer(db: None) -> User:
    return make_user(username="ravi", reviewer=True)


@pytest.fixture
def reviewer_client(reviewer: User, client_for: Callable[[User], APIClient]) -> APIClient:
    return client_for(reviewer)


@pytest.fixture
def grader_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Any) -> Path:
    """Use the recording grader; returns the file listing every invocation."""
    path = tmp_path / "grader-invocations.log"
    monkeypatch.setenv("YOYAKU_TEST_GRADER_LOG", str(path))
    settings.GRADER = "tests.review.graders.RecordingGrader"
    return path


@pytest.fixture
def sandbox_settings(settings: Any) -> Any:
    """The default grader in bubblewrap with small limits. Skips where bubblewrap cannot run,
    unless YOYAKU_REQUIRE_BUBBLEWRAP is set (CI sets it: there, a skip would hide a hole)."""
    from apps.review.grader import grading_isolation

    settings.GRADER = "apps.review.grader.SandboxGrader"
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
