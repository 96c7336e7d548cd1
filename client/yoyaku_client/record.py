"""`Record`: the methods every frozen dataclass of the client would otherwise generate.

`dataclass` compiles each method it adds from source when the class is defined: a frozen
class gets six (`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`),
about a tenth of a millisecond each, so the client's twenty-odd dataclasses took more than
ten of the milliseconds `yoyaku submit` spent before its first request. The three that do not
depend on the class (comparing, hashing and printing its fields) are written once here.
"""

from __future__ import annotations

import dataclasses
import reprlib
from typing import Any

__all__ = ["Record"]


class Record:
    """`__eq__`, `__hash__` and `__repr__` of a frozen dataclass, written once instead of
    generated for each class: a subclass declared `@dataclass(frozen=True, eq=False,
    repr=False)` compares, hashes and prints as the dataclass defaults would make it (its
    fields in order; equal only to an instance of its own class)."""

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return _compared(self) == _compared(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, f.name) for f in _fields(self) if _hashed(f)))

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in _fields(self) if f.repr)
        return f"{self.__class__.__qualname__}({shown})"


def _fields(record: Any) -> tuple[dataclasses.Field[Any], ...]:
    return dataclasses.fields(record)


def _compared(record: Any) -> tuple[Any, ...]:
    return tuple(getattr(record, f.name) for f in _fields(record) if f.compare)


def _hashed(item: dataclasses.Field[Any]) -> bool:
    return item.compare if item.hash is None else bool(item.hash)
