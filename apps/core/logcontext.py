"""Request- and task-scoped log context: every log line carries the ids it is about.

A context variable holds the ids bound so far (request id, user id, job / submission / life /
plan ids). The web middleware binds the request id for the whole request; services bind the
ids of the object they work on (`log_bind`); a task or a watcher step wraps its work in
`log_context(...)`, which restores the previous ids when it ends. `ContextFilter`, on the
console handler, copies them onto every record, whoever logs it (Django, DRF, django-q2 or
our code), for both the plain and the JSON formatter.

The plain format (`PlainFormatter`) writes one line per record whatever the record holds:
request data (a path with `%0A`, an ESC in a header) reaches log lines through messages and
exception texts, so control, format and line-separator characters are written escaped
(`\\n`, `\\x1b`, `\\u202e`); a traceback follows on continuation lines that start with
`CONTINUATION`, so no text from a request can begin a line of its own. JSON lines are one line
by JSON's own escaping.

The user of a web request is read lazily from the request itself (never evaluating Django's
lazy user, which would cost a query inside a log call): once DRF or a page has authenticated
the request, its lines carry the user id.
"""

from __future__ import annotations

import datetime as dt
import logging
import unicodedata
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


@contextmanager
def log_context_fresh() -> Iterator[None]:
    """Run a block with no ids bound at all (a new unit of work on a thread whose context may
    hold the ids a service bound outside any request or task); the previous context is
    restored afterwards."""
    token = _fields.set(_NO_FIELDS)
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


# Categories written escaped in plain lines: controls (C0 including CR, LF and TAB, DEL, C1
# including NEL), format characters (bidirectional controls, zero-width characters), line and
# paragraph separators, lone surrogates (which a strict UTF-8 stream could not even write).
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
CONTINUATION = "  | "


def _escaped(char: str) -> str:
    if unicodedata.category(char) not in _ESCAPED_CATEGORIES:
        return char
    short = _SHORT_ESCAPES.get(char)
    if short is not None:
        return short
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def log_escape(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with every control, format and line-separator character written as a visible
    escape (`\\n`, `\\x1b`, `\\u202e`); with `keep_newlines`, LF stays a line break."""
    if text.isprintable():  # the common case, at C speed: nothing to escape
        return text
    if keep_newlines:
        return "\n".join(log_escape(line) for line in text.split("\n"))
    return "".join(_escaped(char) for char in text)


class PlainFormatter(logging.Formatter):
    """The plain format: one line per record, escaped by `log_escape`; an exception's traceback
    or a stack follows on lines prefixed with `CONTINUATION`. Nothing is cached on the record
    (another handler formats it afresh)."""

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        line = log_escape(self.formatMessage(record))
        details: list[str] = []
        if record.exc_info:
            details.append(self.formatException(record.exc_info))
        elif record.exc_text:
            details.append(record.exc_text)
        if record.stack_info:
            details.append(self.formatStack(record.stack_info))
        for detail in details:
            for extra_line in log_escape(detail.rstrip("\n"), keep_newlines=True).split("\n"):
                line += f"\n{CONTINUATION}{extra_line}"
        return line


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
