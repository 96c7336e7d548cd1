"""Property test over the whole OpenAPI schema: no input makes the API answer 5xx, and every
response matches what the schema documents (status, content type, body)."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.core.management import call_command
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from config.wsgi import application
from tests.factories import make_user


@pytest.fixture
def api_schema() -> Iterator[Any]:
    # Like Django's test client: keep the test's connection (and its transaction) open across
    # the WSGI requests instead of closing it at the end of each.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/schema/", application)
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_no_input_breaks_the_api(case: Any) -> None:
    user = make_user(username="fuzzer")
    token, _ = Token.objects.get_or_create(user=user)
    case.call_and_validate(
        headers={"Authorization": f"Bearer {token.key}"},
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )


def test_schema_generates_without_warnings() -> None:
    """drf-spectacular leaves out (with a warning) any view it cannot describe; a view left out
    would escape the property test above, so a warning fails the suite."""
    call_command("spectacular", "--fail-on-warn", "--validate", stdout=StringIO())
