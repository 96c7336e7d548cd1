from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.response import Response
from rest_framework.test import APIClient

from tests.benchmarks.bundles import grant_add_challenge
from tests.factories.users import make_user

Apply = Callable[..., Any]


@pytest.fixture
def host(db: None) -> User:
    """alice, who may create challenges."""
    return grant_add_challenge(make_user(username="alice"))


@pytest.fixture
def apply_as(client_for: Callable[[User], APIClient]) -> Callable[[User], Apply]:
    """POST a bundle as a user: `apply_as(user)(bundle_bytes, dry_run=False)`."""

    def for_user(user: User) -> Apply:
        client = client_for(user)

        def apply(
            data: bytes, *, dry_run: bool = False, form: dict[str, Any] | None = None
        ) -> Response:
            upload = io.BytesIO(data)
            upload.name = "bundle.zip"
            url = "/api/challenges/" + ("?dry_run=true" if dry_run else "")
            response: Response = client.post(
                url, {"bundle": upload, **(form or {})}, format="multipart"
            )
            return response

        return apply

    return for_user
