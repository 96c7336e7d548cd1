"""The one way to write raw SQL: statements whose table and column names come from `_meta`.

Raw SQL is kept only on hot paths where a benchmark showed the ORM's query compilation
costing more than the database's work (see docs/benchmarks.md). A statement names models and
their *fields*, never tables or columns:

    _BIND = SqlStatement(
        "UPDATE {k} SET {k.job} = %s WHERE {k.id} = %s AND {k.job} IS NULL",
        k=IdempotencyKey,
    )
    rows = _BIND.rowcount([job_id, key_id])

`{k}` renders as the model's quoted `db_table`, `{k.job}` as the quoted column of the field
`job` (`job_id`). A renamed table or column (`db_table`, `db_column`, a migration) follows
automatically; a renamed or removed field raises `FieldDoesNotExist` the first time the
statement renders. Every statement registers itself, and a test renders them all
(`tests/core/test_sql.py`), so a rename fails the suite instead of a request. Values are
always passed as parameters (`%s`), never formatted in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, TypeVar

from django.db import connections
from django.db.models import Model

__all__ = ["ModelInsert", "SqlStatement", "model_from_row"]

M = TypeVar("M", bound=Model)


class _TableRef:
    """Formats as a model's quoted table; its attributes are the quoted columns of its fields."""

    def __init__(self, model: type[Model], quote: Any) -> None:
        self._model = model
        self._quote = quote

    def __str__(self) -> str:
        return str(self._quote(self._model._meta.db_table))

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __getattr__(self, name: str) -> str:
        if name.startswith("_"):
            raise AttributeError(name)
        field = self._model._meta.get_field(name)  # FieldDoesNotExist on a renamed field
        column = getattr(field, "column", None)
        if not column:
            raise ValueError(f"{self._model.__name__}.{name} has no column of its own")
        return str(self._quote(column))


class SqlStatement:
    """A raw SQL template over models; renders once per database vendor and caches it."""

    registry: ClassVar[list[SqlStatement]] = []

    def __init__(self, template: str, **models: type[Model]) -> None:
        self.template = template
        self.models = models
        self._rendered: dict[str, str] = {}
        SqlStatement.registry.append(self)

    def render(self, using: str = "default") -> str:
        connection = connections[using]
        vendor = connection.vendor
        sql = self._rendered.get(vendor)
        if sql is None:
            refs = {
                alias: _TableRef(model, connection.ops.quote_name)
                for alias, model in self.models.items()
            }
            sql = self.template.format(**refs)
            self._rendered[vendor] = sql
        return sql

    def rowcount(self, params: Sequence[Any], *, using: str = "default") -> int:
        """Run a write; the number of rows it changed."""
        with connections[using].cursor() as cursor:
            cursor.execute(self.render(using), params)
            return int(cursor.rowcount)

    def instances(
        self, model: type[M], params: Sequence[Any], *, using: str = "default"
    ) -> list[M]:
        """Run a read whose columns are `model`'s; the model instances it found."""
        return list(model._default_manager.db_manager(using).raw(self.render(using), params))

    def fetchone(self, params: Sequence[Any], *, using: str = "default") -> tuple[Any, ...] | None:
        """Run a read; its first row (None when there is none)."""
        with connections[using].cursor() as cursor:
            cursor.execute(self.render(using), params)
            row = cursor.fetchone()
        return None if row is None else tuple(row)

    def fetchall(self, params: Sequence[Any], *, using: str = "default") -> list[tuple[Any, ...]]:
        """Run a read; all its rows."""
        with connections[using].cursor() as cursor:
            cursor.execute(self.render(using), params)
            return [tuple(row) for row in cursor.fetchall()]

    def instance(
        self, model: type[M], params: Sequence[Any], *, using: str = "default"
    ) -> M | None:
        """Run a read whose columns are some of `model`'s (by column name, in any order); the
        first row as a model instance, or None. Cheaper than `instances` (no RawQuerySet)."""
        with connections[using].cursor() as cursor:
            cursor.execute(self.render(using), params)
            row = cursor.fetchone()
            if row is None:
                return None
            by_column = dict(zip((column[0] for column in cursor.description), row, strict=True))
        # `from_db` takes the values in the model's field order.
        fields = [f for f in model._meta.concrete_fields if f.column in by_column]
        return model.from_db(
            using, [f.attname for f in fields], tuple(by_column[f.column] for f in fields)
        )


def model_from_row(model: type[M], values: Sequence[Any], *, using: str = "default") -> M:
    """An instance of `model` from the values of all its concrete fields, in their order, as a
    raw cursor read them: with the converters a query applies (the backend's and the
    fields': e.g. SQLite's datetimes made aware, its booleans), as the ORM's `from_db` gets."""
    connection = connections[using]
    fields = model._meta.concrete_fields
    converted = list(values)
    for i, field in enumerate(fields):
        col = field.cached_col
        for convert in (
            *connection.ops.get_db_converters(col),
            *col.get_db_converters(connection),
        ):
            converted[i] = convert(converted[i], col, connection)
    return model.from_db(using, [f.attname for f in fields], converted)


class ModelInsert:
    """The INSERT of one new instance of `model` with every concrete field, as
    `Model.objects.create()` writes it (`pre_save`: `auto_now_add` and the like, then
    `get_db_prep_save`), without compiling the query every time. An auto-incremented primary
    key left unset is taken from `RETURNING`. Rendered once per database vendor."""

    registry: ClassVar[list[ModelInsert]] = []

    def __init__(self, model: type[Model]) -> None:
        self.model = model
        self._rendered: dict[tuple[str, bool], str] = {}
        self._rendered_with: dict[tuple[str, SqlStatement], str] = {}
        ModelInsert.registry.append(self)

    def _fields(self, returning: bool) -> list[Any]:
        pk = self.model._meta.pk
        return [f for f in self.model._meta.concrete_fields if not (returning and f is pk)]

    def render(self, using: str = "default", *, returning: bool = False) -> str:
        connection = connections[using]
        sql = self._rendered.get((connection.vendor, returning))
        if sql is None:
            quote = connection.ops.quote_name
            columns = ", ".join(quote(f.column) for f in self._fields(returning))
            marks = ", ".join("%s" for _ in self._fields(returning))
            table = quote(self.model._meta.db_table)
            sql = f"INSERT INTO {table} ({columns}) VALUES ({marks})"  # noqa: S608 - names from _meta
            pk = self.model._meta.pk
            if returning and pk is not None:
                sql += f" RETURNING {quote(str(pk.column))}"
            self._rendered[(connection.vendor, returning)] = sql
        return sql

    def _params(self, instance: Model, connection: Any, returning: bool) -> list[Any]:
        return [
            field.get_db_prep_save(field.pre_save(instance, True), connection)
            for field in self._fields(returning)
        ]

    def params(self, instance: Model, *, using: str = "default") -> list[Any]:
        """The values of every concrete field of `instance` (its primary key set), in the
        order of the model's concrete fields, as `save` writes them: for a statement of the
        caller's that inserts the row itself (then `inserted`)."""
        return self._params(instance, connections[using], False)

    def inserted(self, instance: Model, *, using: str = "default") -> None:
        """Mark `instance` as saved (a statement of the caller's inserted it)."""
        instance._state.adding = False
        instance._state.db = using

    def save(self, instance: Model, *, using: str = "default") -> None:
        """Insert `instance` (a new one: IntegrityError on a conflict, like `create`)."""
        connection = connections[using]
        pk = self.model._meta.pk
        returning = pk is not None and getattr(instance, pk.attname) is None
        params = self._params(instance, connection, returning)
        with connection.cursor() as cursor:
            cursor.execute(self.render(using, returning=returning), params)
            if returning:
                setattr(instance, pk.attname, cursor.fetchone()[0])
        self.inserted(instance, using=using)

    def save_with(
        self,
        instance: Model,
        statement: SqlStatement,
        params: Sequence[Any],
        *,
        using: str = "default",
    ) -> int:
        """PostgreSQL only: insert `instance` (its primary key already set) and run `statement`
        (an UPDATE or DELETE, with its `params`) as ONE statement, `WITH ins AS (INSERT …)
        <statement>`: one round trip instead of two. Both see the snapshot the statement
        started with (`statement` does not see the new row; a deferred foreign key to it is
        checked at commit). Returns `statement`'s row count; IntegrityError as `save`."""
        connection = connections[using]
        if connection.vendor != "postgresql":
            raise NotImplementedError("an INSERT inside WITH needs PostgreSQL")
        key = (connection.vendor, statement)
        sql = self._rendered_with.get(key)
        if sql is None:
            sql = f"WITH ins AS ({self.render(using)}) {statement.render(using)}"
            self._rendered_with[key] = sql
        values = [*self._params(instance, connection, False), *params]
        with connection.cursor() as cursor:
            cursor.execute(sql, values)
            count = int(cursor.rowcount)
        self.inserted(instance, using=using)
        return count
