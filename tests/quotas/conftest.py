from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.submissions.models import Submission
from tests.factories.submissions import make_submission

SubmissionMaker = Callable[..., Submission]


@pytest.fixture
def ready_submission(user: User) -> Submission:
    """A complete draft submission of alice."""
    return make_submission(owner=user)


@pytest.fixture
def submit(user_client: APIClient) -> Callable[..., Any]:
    """POST /api/jobs/ as alice; `headers` go as HTTP headers."""

    def post(body: dict[str, Any], client: APIClient | None = None, **headers: str) -> Any:
        return (client or user_client).post("/api/jobs/", body, format="json", headers=headers)

    return post
