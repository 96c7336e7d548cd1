"""The OpenAPI schema says exactly what the server accepts and answers.

Schemathesis runs every check (server errors, status codes, content types, response bodies and
headers, schema-valid data accepted, schema-invalid data refused, authentication, methods,
use-after-free, resource availability) with the repository's `schemathesis.toml`, over the
coverage, fuzzing and stateful phases, as a plain user and as a reviewer. For CI the example
counts are small and the generation is derandomized, so a run is repeatable.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.core.management import call_command
from django.db import close_old_connections
from django.test import Client
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from schemathesis.config import SchemathesisConfig

from config.wsgi import application
from tests.factories.tokens import make_token
from tests.factories.users import make_user

ROOT = Path(__file__).resolve().parents[1]
# Per phase and operation: enough to cross every documented status on every operation, small
# enough for a CI run well under a minute.
MAX_EXAMPLES = 3
STATEFUL_STEPS = 4


def ci_config(token: str) -> SchemathesisConfig:
    """The repository's configuration, derandomized, with CI-sized example counts and the
    user's token as the authentication every check knows about (so `ignored_auth` can take it
    away)."""
    data = tomllib.loads((ROOT / "schemathesis.toml").read_text())
    data["generation"] = {**data.get("generation", {}), "deterministic": True}
    data["generation"]["max-examples"] = MAX_EXAMPLES
    data["phases"]["stateful"]["max-steps"] = STATEFUL_STEPS
    data["headers"] = {"Authorization": f"Bearer {token}"}
    return SchemathesisConfig.from_dict(data, base_dir=str(ROOT))


@contextmanager
def wsgi_schema(token: str) -> Iterator[Any]:
    """The live application's schema, loaded through WSGI, authenticated by `token`."""
    # Like Django's test client: keep the test's connection (and its transaction) open across
    # the WSGI requests instead of closing it at the end of each.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/schema/", application, config=ci_config(token))
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@pytest.fixture
def plain_user_auth(db: None) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token(make_user(username='fuzzer'))}"}


@pytest.fixture
def reviewer_auth(db: None) -> dict[str, str]:
    reviewer = make_user(username="fuzzing-reviewer", reviewer=True)
    return {"Authorization": f"Bearer {make_token(reviewer)}"}


@pytest.fixture
def plain_user_schema(plain_user_auth: dict[str, str]) -> Iterator[Any]:
    with wsgi_schema(plain_user_auth["Authorization"].split()[1]) as loaded:
        yield loaded


@pytest.fixture
def reviewer_schema(reviewer_auth: dict[str, str]) -> Iterator[Any]:
    with wsgi_schema(reviewer_auth["Authorization"].split()[1]) as loaded:
        yield loaded


FAST = hypothesis_settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@schemathesis.pytest.from_fixture("plain_user_schema").parametrize()
@FAST
def test_the_api_conforms_to_its_schema_for_a_plain_user(
    case: Any, plain_user_auth: dict[str, str]
) -> None:
    case.call_and_validate(headers=plain_user_auth)


# A reviewer is a plain user everywhere but on the review operations (and `me`).
@(
    schemathesis.pytest.from_fixture("reviewer_schema")
    .include(path_regex="^/api/(review/|me/)")
    .parametrize()
)
@FAST
def test_the_api_conforms_to_its_schema_for_a_reviewer(
    case: Any, reviewer_auth: dict[str, str]
) -> None:
    case.call_and_validate(headers=reviewer_auth)


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["plain_user_schema", "reviewer_schema"])
def test_sequences_of_calls_conform_to_the_schema(
    role: str, request: pytest.FixtureRequest
) -> None:
    """The stateful phase: calls chained through the links schemathesis infers (create a
    submission, read it, add a file; reserve, then release or extend; ...)."""
    loaded = request.getfixturevalue(role)
    loaded.as_state_machine().run(
        settings=hypothesis_settings(
            FAST,
            max_examples=MAX_EXAMPLES * 2,
            stateful_step_count=STATEFUL_STEPS,
            derandomize=True,
            database=None,
        )
    )


@pytest.mark.django_db
def test_a_nested_validation_error_renders_nested_fields(client: Client) -> None:
    """Never a Python repr such as "{'method': [ErrorDetail(...)]}"."""
    token = make_token(make_user(username="nested"))
    response = client.post(
        "/api/schedules/",
        {
            "schedule_type": "point",
            "term": {"birth_time": "2999-01-01 00:00:00"},
            "birth": {"path": "/api/me/", "method": "FETCH", "retry_count": -1},
        },
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST
    body = response.json()
    assert body["code"] == "invalid_schedule"
    assert set(body["fields"]) == {"birth"}
    assert set(body["fields"]["birth"]) == {"method", "retry_count"}
    assert all(isinstance(m, str) for m in body["fields"]["birth"]["method"])
    assert "ErrorDetail" not in response.content.decode()
    assert body["error"].startswith("birth.method: ")


def test_schema_generates_without_warnings() -> None:
    """drf-spectacular leaves out (with a warning) any view it cannot describe; a view left out
    would escape the checks above, so a warning fails the suite."""
    call_command("spectacular", "--fail-on-warn", "--validate", stdout=StringIO())
