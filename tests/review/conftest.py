from __future__ import annotations

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
