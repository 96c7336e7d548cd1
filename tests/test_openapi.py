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
from http import HTTPStatus
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core import signals
from django.core.management import call_command
from django.db import close_old_connections
from django.test import Client
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from rest_framework.authtoken.models import Token
from schemathesis.config import SchemathesisConfig

from config.wsgi import application
from tests.factories import make_user

ROOT = Path(__file__).resolve().parents[1]
# Per phase and operation: enough to cross every documented status on every operation, small
# enough for a CI run well under a minute.
MAX_EXAMPLES = 4
STATEFUL_STEPS = 4


def ci_config() -> SchemathesisConfig:
    """The repository's configuration, derandomized and with CI-sized example counts."""
    data = tomllib.loads((ROOT / "schemathesis.toml").read_text())
    data["generation"] = {**data.get("generation", {}), "deterministic": True}
    data["generation"]["max-examples"] = MAX_EXAMPLES
    data["phases"]["stateful"]["max-steps"] = STATEFUL_STEPS
    return SchemathesisConfig.from_dict(data, base_dir=str(ROOT))


@pytest.fixture
def api_schema() -> Iterator[Any]:
    # Like Django's test client: keep the test's connection (and its transaction) open across
    # the WSGI requests instead of closing it at the end of each.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/schema/", application, config=ci_config())
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


schema = schemathesis.pytest.from_fixture("api_schema")

FAST = hypothesis_settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def bearer(user: User) -> dict[str, str]:
    token, _ = Token.objects.get_or_create(user=user)
    return {"Authorization": f"Bearer {token.key}"}


@pytest.mark.django_db
@schema.parametrize()
@FAST
def test_the_api_conforms_to_its_schema_for_a_plain_user(case: Any) -> None:
    case.call_and_validate(headers=bearer(make_user(username="fuzzer")))


@pytest.mark.django_db
@schema.parametrize()
@FAST
def test_the_api_conforms_to_its_schema_for_a_reviewer(case: Any) -> None:
    case.call_and_validate(headers=bearer(make_user(username="fuzzing-reviewer", reviewer=True)))


@pytest.mark.django_db
@pytest.mark.parametrize("reviewer", [False, True], ids=["plain", "reviewer"])
def test_sequences_of_calls_conform_to_the_schema(api_schema: Any, reviewer: bool) -> None:
    """The stateful phase: calls chained through the links schemathesis infers (create a
    submission, read it, add a file; reserve, then release or extend; ...)."""
    headers = bearer(make_user(username="stateful", reviewer=reviewer))
    base = api_schema.as_state_machine()

    class Calls(base):  # type: ignore[misc,valid-type]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": headers}

    Calls.run(
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
    user = make_user(username="nested")
    response = client.post(
        "/api/schedules/",
        {
            "schedule_type": "point",
            "term": {"birth_time": "2999-01-01 00:00:00"},
            "birth": {"path": "/api/me/", "method": "FETCH", "retry_count": -1},
        },
        content_type="application/json",
        headers=bearer(user),
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
