"""One transition table per state machine; anything not in it raises InvalidTransition."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, TypeVar

from apps.core.exceptions import InvalidTransition

S = TypeVar("S", bound=str)


class TransitionTable(Generic[S]):
    def __init__(self, name: str, table: Mapping[S, frozenset[S]]) -> None:
        self.name = name
        self.table = dict(table)

    def allowed(self, old: S, new: S) -> bool:
        return new in self.table.get(old, frozenset())

    def assert_allowed(self, old: S, new: S) -> None:
        if not self.allowed(old, new):
            raise InvalidTransition(
                f"{self.name} cannot go from {old} to {new}.",
                extra={"from_status": str(old), "to_status": str(new)},
            )

    def sources_of(self, new: S) -> list[S]:
        """Every state from which `new` may be reached (for compare-and-set updates)."""
        return [old for old, targets in self.table.items() if new in targets]
