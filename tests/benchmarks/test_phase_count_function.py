"""The phase's check at enqueue runs, on PostgreSQL, as a function created by a migration: the
function in the database, the migration's text and the statements of
`apps.benchmarks.services.phase_count` must agree (a renamed field or a changed statement
needs a migration that replaces the function)."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection

from apps.benchmarks.services.phase_count import (
    COUNT_FUNCTION,
    COUNT_FUNCTION_ARGS,
    count_function_body,
    count_function_sql,
)
from tests.plpgsql import stored_function

pytestmark = pytest.mark.django_db


def test_the_migration_creates_the_function_the_module_defines() -> None:
    migration = importlib.import_module("apps.benchmarks.migrations.0006_entry_count_function")
    assert count_function_sql() == migration.CREATE


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL function")
def test_the_function_in_the_database_is_the_modules() -> None:
    body, arguments, _returns, volatility = stored_function(COUNT_FUNCTION)
    assert body == count_function_body()
    assert arguments == ", ".join(COUNT_FUNCTION_ARGS)
    # VOLATILE: each statement takes its own snapshot (the count sees what the lock waited for).
    assert volatility == "v"
