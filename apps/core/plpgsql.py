"""PostgreSQL functions whose statements are `SqlStatement`s (`apps.core.sql`).

A hot path that runs the same few statements thousands of times can run them inside one
PL/pgSQL function: one round trip, and PL/pgSQL keeps each statement's plan for the session,
so the server does not parse and plan them again on every call. Server-side prepared
statements would save the same, but a transaction-pooling PgBouncer breaks them; a
function's plans live in the server session and never reach the client protocol.

The function is created by a migration that holds its text written out; its body is
rendered from the module's statements (`parameters` turns their `%s` placeholders into the
function's `$n` arguments or its variables), and a test compares the migration's text, the
rendering and the function in the database, so a renamed field or a changed statement needs
a migration that replaces the function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import migrations

__all__ = ["PlpgsqlFunction", "on_postgresql", "parameters"]


def parameters(sql: str, names: Sequence[int | str]) -> str:
    """`sql` with its `%s` placeholders, in order, as the function's arguments (an int n is
    `$n`) or its variables (a string is the variable's name)."""
    first, *parts = sql.split("%s")
    if len(parts) != len(names):
        raise ValueError(f"{len(parts)} placeholders for {len(names)} parameters")
    return first + "".join(
        (f"${name}" if isinstance(name, int) else name) + part
        for name, part in zip(names, parts, strict=True)
    )


@dataclass(frozen=True)
class PlpgsqlFunction:
    """A VOLATILE PL/pgSQL function: its name, its arguments' types (positional, `$1`…), what
    it returns (`pg_get_function_result`'s spelling) and its body rendered for a database."""

    name: str
    arguments: tuple[str, ...]
    returns: str
    body: Callable[[str], str]

    def create_sql(self, using: str = "default") -> str:
        """CREATE OR REPLACE of the function as the module defines it (what its migration
        ran, written out there)."""
        return (
            f"CREATE OR REPLACE FUNCTION {self.name}({', '.join(self.arguments)})"
            f" RETURNS {self.returns} LANGUAGE plpgsql VOLATILE"
            f" AS $body${self.body(using)}$body$"
        )

    def drop_sql(self) -> str:
        return f"DROP FUNCTION IF EXISTS {self.name}({', '.join(self.arguments)})"

    def call_sql(self) -> str:
        """The call, its arguments as `%s` placeholders cast to their types."""
        marks = ", ".join(f"%s::{kind}" for kind in self.arguments)
        return f"SELECT * FROM {self.name}({marks})"  # noqa: S608 - names of this module


def on_postgresql(create: Sequence[str], drop: Sequence[str]) -> migrations.RunPython:
    """A migration's operation that runs `create`'s statements forward and `drop`'s backward,
    on PostgreSQL only (SQLite keeps the statements in the modules)."""

    def run(statements: Sequence[str]) -> Callable[[Any, Any], None]:
        def operation(apps: Any, schema_editor: Any) -> None:
            if schema_editor.connection.vendor == "postgresql":
                for statement in statements:
                    schema_editor.execute(statement)

        return operation

    return migrations.RunPython(run(create), run(drop))
