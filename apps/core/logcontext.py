"""Request- and task-scoped log context: every log line carries the ids it is about.

A context variable holds the ids bound so far (request id, user id, job / submission / life /
plan ids). The web middleware binds the request id for the whole request; services bind the
ids of the object they work on (`log_bind`); a task or a watcher step wraps its work in
`log_context(...)`, which restores the previous ids when it ends. `ContextFilter`, on the
console handler, copies them onto every record, whoever logs it (Django, DRF, django-q2 or
our code), for both the plain and the JSON formatter.

The user of a web request is read lazily from the request itself (never evaluating Django's
lazy user, which would cost a query inside a log call): once DRF or a page has authenticated
the request, its lines carry the user id.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from types import MappingProxyType
from typing import Any

from django.utils.functional import SimpleLazyObject, empty
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

# The ids a line may be about, in the order the plain format shows them.
ID_FIELDS = ("request_id", "user_id", "job_id", "submission_id", "life_uuid", "plan_id")

_NO_FIELDS: Mapping[str, str] = MappingProxyType({})
_fields: ContextVar[Mapping[str, str]] = ContextVar("yoyaku_log_fields", default=_NO_FIELDS)
_request: ContextVar[Any] = ContextVar("yoyaku_log_request", default=None)


def _clean(ids: Mapping[str, object]) -> dict[str, str]:
    unknown = set(ids) - set(ID_FIELDS)
    if unknown:
        raise ValueError(f"unknown log context field(s): {', '.join(sorted(unknown))}")
    return {name: str(value) for name, value in ids.items() if value not in (None, "")}


def log_bind(**ids: object) -> None:
    """Add ids to the current context until the enclosing request / task / `log_context` ends
    (empty values are ignored)."""
    _fields.set({**_fields.get(), **_clean(ids)})


@contextmanager
def log_context(**ids: object) -> Iterator[None]:
    """Run a block with these ids added to the log context; the previous context is restored
    afterwards, also for ids bound inside the block with `log_bind`."""
    token = _fields.set({**_fields.get(), **_clean(ids)})
    try:
        yield
    finally:
        _fields.reset(token)


def log_context_get() -> dict[str, str]:
    """A copy of the ids bound now (request id of the current request, ...)."""
    return dict(_fields.get())


def current_request_id() -> str:
    """The request id bound now ("" outside a request or a task that carries one)."""
    return _fields.get().get("request_id", "")


def request_context_start(*, request: Any, request_id: str) -> tuple[Token[Any], Token[Any]]:
    """Start a request's context (only the request id bound); `request_context_end` ends it."""
    return _fields.set({"request_id": request_id}), _request.set(request)


def request_context_end(tokens: tuple[Token[Any], Token[Any]]) -> None:
    _fields.reset(tokens[0])
    _request.reset(tokens[1])


def request_user_id(request: Any) -> int | None:
    """The id of the request's user if it is already known (authenticated by DRF, or Django's
    lazy user already evaluated), without evaluating anything."""
    if request is None:
        return None
    user = vars(request).get("user")
    if isinstance(user, SimpleLazyObject):
        user = vars(user).get("_wrapped", empty)
        if user is empty:
            return None
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    pk: Any = user.pk
    return int(pk)


class ContextFilter(logging.Filter):
    """Copies the bound ids onto each record (`request_id` and `user_id` always, None when
    unknown; the others when bound) and a `context` text for the plain format."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = dict(_fields.get())
        # Django logs a 4xx/5xx answer (`django.request`) after the middleware chain has
        # returned, with the request on the record: its ids come from the request itself.
        request = getattr(record, "request", None)
        if request is not None and getattr(request, "request_id", None):
            fields.setdefault("request_id", str(request.request_id))
        else:
            request = _request.get()
        if "user_id" not in fields:
            user_id = request_user_id(request)
            if user_id is not None:
                fields["user_id"] = str(user_id)
        record.request_id = fields.get("request_id")
        record.user_id = fields.get("user_id")
        for name in ID_FIELDS[2:]:
            if name in fields and not hasattr(record, name):
                setattr(record, name, fields[name])
        shown = [f"{name}={fields[name]}" for name in ID_FIELDS if name in fields]
        record.context = f" [{' '.join(shown)}]" if shown else ""
        return True


class JsonFormatter(_JsonFormatter):
    """python-json-logger with our field names: time (ISO 8601, UTC), level, logger, message,
    request_id, user_id, the ids bound for the line, and any `extra=` fields."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "rename_fields", {"asctime": "time", "levelname": "level", "name": "logger"}
        )
        kwargs.setdefault(
            "reserved_attrs", [*RESERVED_ATTRS, "context", "taskName", "request", "server_time"]
        )
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s", **kwargs)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging's name
        moment = dt.datetime.fromtimestamp(record.created, tz=dt.UTC)
        return moment.isoformat(timespec="milliseconds")
