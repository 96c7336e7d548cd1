"""Transactional tests on PostgreSQL emptied with DELETE, not TRUNCATE.

After every `django_db(transaction=True)` test Django empties every table with one TRUNCATE of
all of them. TRUNCATE gives each table new files and takes an ACCESS EXCLUSIVE lock on each:
on the suite's 51 nearly empty tables it cost 0.7 to 0.9 s on a busy 2-core machine, DELETE of
the same rows 0.04 to 0.07 s (docs/decisions.md, "Emptying the database between transactional
tests"). Every foreign key Django makes is DEFERRABLE INITIALLY DEFERRED, so the DELETEs run
in any order inside the flush's one transaction; TRUNCATE without RESTART IDENTITY (Django's,
unless a test asks for `reset_sequences`) leaves the sequences as DELETE does. A test that
resets sequences is emptied by Django's own TRUNCATE.

Only the test process's connections flush this way: the product's code and the processes the
tests start are untouched.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.backends.postgresql.operations import DatabaseOperations

_truncate = DatabaseOperations.sql_flush


def _delete_flush(
    self: DatabaseOperations,
    style: Any,
    tables: Iterable[str],
    *,
    reset_sequences: bool = False,
    allow_cascade: bool = False,
) -> list[str]:
    names = list(tables)
    if reset_sequences or not names:
        return _truncate(
            self, style, names, reset_sequences=reset_sequences, allow_cascade=allow_cascade
        )
    return [
        "SET CONSTRAINTS ALL DEFERRED",
        *(f"DELETE FROM {self.quote_name(name)}" for name in names),  # noqa: S608 - table names
    ]


def flush_by_delete() -> None:
    """Empty the tables with DELETE in this process's PostgreSQL flushes (module doc)."""
    DatabaseOperations.sql_flush = _delete_flush  # type: ignore[method-assign,assignment]
