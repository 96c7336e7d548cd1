"""A rescore item's take and an entry's record run, on PostgreSQL, as functions created by a
migration: the function in the database, the migration's text and the statements of
`rescore_takes` and `rescore_records` must agree (a renamed field or a changed statement
needs a migration that replaces the function)."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection

from apps.benchmarks.services.rescore_records import RECORD_FUNCTION
from apps.benchmarks.services.rescore_takes import TAKE_FUNCTION
from apps.core.plpgsql import PlpgsqlFunction
from tests.plpgsql import stored_function

pytestmark = pytest.mark.django_db

MIGRATION = "apps.benchmarks.migrations.0008_rescore_functions"
FUNCTIONS = {"take": TAKE_FUNCTION, "record": RECORD_FUNCTION}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_the_migration_creates_the_function_the_module_defines(name: str) -> None:
    migration = importlib.import_module(MIGRATION)
    function = FUNCTIONS[name]
    assert function.create_sql() == getattr(migration, name.upper())
    assert function.drop_sql() == getattr(migration, f"DROP_{name.upper()}")


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL function")
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_the_function_in_the_database_is_the_modules(name: str) -> None:
    function: PlpgsqlFunction = FUNCTIONS[name]
    body, arguments, returns, volatility = stored_function(function.name)
    assert body == function.body("default")
    assert arguments == ", ".join(function.arguments)
    assert returns == function.returns
    # VOLATILE: each statement takes its own snapshot (a lock waited for shows its holder's
    # commit), and the function may write.
    assert volatility == "v"
