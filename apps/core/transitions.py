"""One transition table per state machine, and the one compare-and-set that moves rows along it.

Every change of a status or state column (jobs, submissions, grading attempts, plans, Lives,
task runs) goes through `TransitionTable.move` (many rows, or one row under extra conditions)
or `TransitionTable.move_one` (a loaded object): the table is checked first (a move it does not
list raises InvalidTransition and writes nothing), then one `UPDATE ... WHERE <field> IN
(<from-states>)` writes the new state with the caller's other columns, so a stale caller never
overwrites a newer state. Raw SQL writers (the job submission's seal) ask `assert_allowed` for
the same answer before they run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar

from django.db import models

from apps.core.exceptions import InvalidTransition

S = TypeVar("S", bound=str)
M = TypeVar("M", bound=models.Model)


class TransitionTable(Generic[S]):
    """The allowed moves of one state machine, stored in the model column `field`."""

    def __init__(
        self, name: str, table: Mapping[S, frozenset[S]], *, field: str = "status"
    ) -> None:
        self.name = name
        self.field = field
        self.table = dict(table)

    def allowed(self, old: S, new: S) -> bool:
        return new in self.table.get(old, frozenset())

    def assert_allowed(self, old: S, new: S) -> None:
        """InvalidTransition (409 `invalid_transition`) unless the table lists `old` → `new`."""
        if not self.allowed(old, new):
            raise InvalidTransition(
                f"{self.name} cannot go from {old} to {new}.",
                extra={"from_status": str(old), "to_status": str(new)},
            )

    def sources_of(self, new: S) -> list[S]:
        """Every state from which `new` may be reached."""
        return [old for old, targets in self.table.items() if new in targets]

    def move(
        self,
        queryset: models.QuerySet[M],
        *,
        to: S,
        old: S | Iterable[S] | None = None,
        **values: Any,
    ) -> int:
        """Compare-and-set every row of `queryset` that is in `old` (one state or several; by
        default every state the table allows to reach `to`) to `to`, writing `values` in the
        same UPDATE. Returns how many rows moved (0: none was still in `old`).

        Raises InvalidTransition, writing nothing, when the table forbids a move from one of
        the given `old` states to `to`.
        """
        if old is None:
            sources = self.sources_of(to)
        else:
            sources = [old] if isinstance(old, str) else list(old)
            for source in sources:
                self.assert_allowed(source, to)
        if not sources:
            return 0
        return queryset.filter(**{f"{self.field}__in": sources}).update(
            **{self.field: to}, **values
        )

    def move_one(
        self,
        obj: M,
        *,
        to: S,
        where: Mapping[str, Any] | None = None,
        **values: Any,
    ) -> M:
        """Compare-and-set `obj` from the state it was loaded with to `to` (also matching
        `where`, e.g. a lease token), writing `values` in the same UPDATE; `obj` is updated in
        place. Raises InvalidTransition when the table forbids the move or when the row is no
        longer in that state (a lost race): nothing is written either way."""
        old: S = getattr(obj, self.field)
        queryset = type(obj)._default_manager.filter(pk=obj.pk, **(where or {}))
        if self.move(queryset, old=old, to=to, **values) != 1:
            raise InvalidTransition(
                f"{self.name} {obj.pk} is no longer {old}; it cannot go to {to}.",
                extra={"from_status": str(old), "to_status": str(to)},
            )
        setattr(obj, self.field, to)
        for name, value in values.items():
            if not hasattr(value, "resolve_expression"):  # an F() stays unknown until reloaded
                setattr(obj, name, value)
        return obj
