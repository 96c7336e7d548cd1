"""Reading the API's JSON into the SDK's dataclasses, by their fields' declared types.

A field reads the answer's value of the same name (`api(key=...)` names another one) and
converts it by its type; a missing value reads as None, and any other value is ignored, so a
newer server does not break an older client:

    str                     None → "" (or `api(missing=...)`), else str(value)
    int, float              None → 0 and 0.0, else int(value) and float(value)
    bool                    bool(value)
    int | None, ...         None stays None, else int(value), float(value), str(value)
    dt.datetime | None      `parse_time` (ISO 8601)
    list[str]               [str(x) for x in value or []]
    dict[str, Any]          a copy of a mapping, else {} (`| None`: else None)
    Model                   Model.from_api(value or {})
    Model | None            Model.from_api(value) for a mapping, else None
    list[Model]             [Model.from_api(x) for x in value or []]
    list[Model] | None      the mappings of a list read as models, else None

`api(decode=f)` replaces the rule with `f(value)`; `api(skip=True)` leaves the field to its
default or to the caller (`decode(cls, data, field=value)`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from yoyaku_client.errors import YoyakuError
from yoyaku_client.record import Record

__all__ = ["ApiModel", "api", "decode", "parse_time", "to_jsonable"]

T = TypeVar("T")
M = TypeVar("M", bound="ApiModel")
Reader = Callable[[Any], Any]

_METADATA_KEY = "yoyaku_api"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class _Reading(Record):
    """How one field is read from an answer (see `api`)."""

    key: str | None = None
    decode: Reader | None = None
    missing: str = ""
    skip: bool = False


def api(
    *, key: str | None = None, decode: Reader | None = None, missing: str = "", skip: bool = False
) -> dict[str, Any]:
    """A field's reading rule, as `dataclasses.field(metadata=api(...))`: `key` the answer's
    name for it, `decode` a conversion of its own, `missing` the text of a missing string,
    `skip` not read from the answer at all."""
    return {_METADATA_KEY: _Reading(key=key, decode=decode, missing=missing, skip=skip)}


def parse_time(value: Any) -> dt.datetime | None:
    """ISO 8601 with offset (the API's format) → aware datetime; None and "" read as None."""
    if value is None or value == "":
        return None
    text = str(value)
    if text.endswith("Z"):  # fromisoformat reads "Z" only from Python 3.11 on
        text = text[:-1] + "+00:00"
    return dt.datetime.fromisoformat(text)


class ApiModel(Record):
    """A dataclass that reads itself from an API answer by its fields (see the module)."""

    @classmethod
    def from_api(cls: type[M], data: Mapping[str, Any]) -> M:
        return decode(cls, data)

    @classmethod
    def maybe(cls: type[M], data: Any) -> M | None:
        """`from_api` of a mapping; None for anything else (an absent nested object)."""
        return cls.from_api(data) if isinstance(data, Mapping) else None


def decode(cls: type[T], data: Mapping[str, Any], **given: Any) -> T:
    """An instance of the dataclass `cls` read from `data`; `given` sets fields as they are."""
    if not isinstance(data, Mapping):  # a server's answer of another shape: its error
        raise YoyakuError(f"the server's answer is not a {cls.__name__}: {type(data).__name__}")
    readers = _READERS.get(cls) or _READERS.setdefault(cls, _readers(cls))
    values = {name: read(data.get(key)) for name, key, read in readers if name not in given}
    return cls(**values, **given)


# Each class's readers, built on its first reading (a race builds the same ones twice).
_READERS: dict[type[Any], tuple[tuple[str, str, Reader], ...]] = {}


def _readers(cls: type[Any]) -> tuple[tuple[str, str, Reader], ...]:
    hints = typing.get_type_hints(cls)
    readers = []
    for item in dataclasses.fields(cls):
        reading = item.metadata.get(_METADATA_KEY, _Reading())
        if reading.skip:
            continue
        read = reading.decode or _rule(
            hints[item.name], reading.missing, f"{cls.__name__}.{item.name}"
        )
        readers.append((item.name, reading.key or item.name, read))
    return tuple(readers)


def _optional(convert: Callable[[Any], Any]) -> Reader:
    return lambda value: None if value is None else convert(value)


def _rule(hint: Any, missing: str, where: str) -> Reader:
    optional = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        kinds = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(kinds) == 1 and len(typing.get_args(hint)) == 2
        if not optional:
            raise TypeError(f"{where}: no reading rule for {hint}; give it api(decode=...)")
        hint = kinds[0]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in (str, int, float) and optional:
        return _optional(hint)
    if hint is str:
        return lambda value: missing if value is None else str(value)
    if hint is int:
        return lambda value: 0 if value is None else int(value)
    if hint is float:
        return lambda value: (0.0 if value is None else float(value)) or 0.0
    if hint is bool:
        return bool
    if hint is dt.datetime and optional:
        return parse_time
    if origin is dict:
        empty: dict[str, Any] | None = None if optional else {}
        return lambda value: dict(value) if isinstance(value, Mapping) else empty
    if origin is list and args == (str,) and not optional:
        return lambda value: [str(x) for x in value or []]
    if origin is list and _is_model(args[0]):
        model = args[0]
        if optional:
            return lambda value: (
                [model.from_api(x) for x in value if isinstance(x, Mapping)]
                if isinstance(value, list)
                else None
            )
        return lambda value: [model.from_api(x) for x in value or []]
    if _is_model(hint):
        return hint.maybe if optional else lambda value: hint.from_api(value or {})
    raise TypeError(f"{where}: no reading rule for {hint}; give it api(decode=...)")


def _is_model(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, ApiModel)


def to_jsonable(value: Any) -> Any:
    """Dataclasses, datetimes, lists and dicts → JSON-ready values (what `--json` prints)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value
