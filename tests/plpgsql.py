"""The PL/pgSQL functions' tests read a function back from the database the same way."""

from __future__ import annotations

from typing import NamedTuple

from django.db import connection


class StoredFunction(NamedTuple):
    body: str
    arguments: str
    returns: str
    volatility: str


def stored_function(name: str) -> StoredFunction:
    """The one function called `name` in the database: its source, its identity arguments,
    its result type and its volatility (`v`: VOLATILE, so that each statement takes its own
    snapshot and a lock waited for shows its holder's commit)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.prosrc, pg_get_function_identity_arguments(p.oid),"
            " pg_get_function_result(p.oid), p.provolatile FROM pg_proc p WHERE p.proname = %s",
            [name],
        )
        rows = cursor.fetchall()
    assert len(rows) == 1, rows
    return StoredFunction(*rows[0])
