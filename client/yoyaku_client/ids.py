"""Ids as people type them: the API's ids are 32 lowercase hex characters; tables show a
unique prefix (as git shows commits), and every command takes either back.

A full id is sent as it is. A shorter hex prefix (at least `MIN_PREFIX` characters) is looked
up among the caller's own objects of that kind (the list endpoints): one match is the id,
none or several are an `IdError` naming what was found. Anything else is malformed and is
refused before a request is made, so `yoyaku logs abc` says the id is malformed instead of
"No API endpoint at /api/jobs/abc/logs/".
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Sequence

from yoyaku_client.errors import YoyakuError

__all__ = ["MIN_PREFIX", "SHORT_ID", "IdError", "resolve_id", "short_id_length"]

FULL_ID = re.compile(r"^[0-9a-f]{32}$")
_PREFIX = re.compile(r"^[0-9a-f]+$")
#: The shortest prefix accepted back (git's own minimum).
MIN_PREFIX = 4
#: The shortest prefix tables show.
SHORT_ID = 8
#: Candidates named in an ambiguity error.
_SHOWN = 10


class IdError(YoyakuError):
    """An id the client cannot use. `code`: `malformed_id` (not hex, too short or too long),
    `ambiguous_id` (a prefix of several), `unknown_id` (a prefix of none). `usage` is True when
    the user must type something else (exit 2), False when nothing of theirs matched (exit 1,
    like the server's 404)."""

    def __init__(self, code: str, message: str, *, candidates: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.candidates = list(candidates)

    @property
    def usage(self) -> bool:
        return self.code != "unknown_id"

    def to_dict(self) -> dict[str, object]:
        body: dict[str, object] = {"success": False, "code": self.code, "error": str(self)}
        if self.candidates:
            body["candidates"] = self.candidates
        return body


def resolve_id(
    given: str, *, kind: str, candidates: Callable[[], Iterable[str]] | None = None
) -> str:
    """`given` as a full id: itself when it is one; else the one id of `candidates()` it is a
    prefix of. `kind` names the objects in messages ("job", "reservation"). Without
    `candidates` (no list holds them, e.g. another user's submission for staff) only a full
    id is accepted. Upper-case hex is read as lower-case."""
    text = given.strip().lower()
    if FULL_ID.match(text):
        return text
    shape = "32 hexadecimal characters"
    if not _PREFIX.match(text) or len(text) > 32:
        raise IdError(
            "malformed_id",
            f"{given!r} is not a {kind} id: an id is {shape} (or a unique prefix of at least "
            f"{MIN_PREFIX}, as tables show it)",
        )
    if candidates is None:
        raise IdError(
            "malformed_id", f"{given!r} is too short: give the {kind}'s whole id ({shape})"
        )
    if len(text) < MIN_PREFIX:
        raise IdError(
            "malformed_id",
            f"{given!r} is too short: give at least {MIN_PREFIX} characters of the {kind} id",
        )
    found = sorted({c for c in candidates() if c.startswith(text)})
    if len(found) == 1:
        return found[0]
    if not found:
        raise IdError("unknown_id", f"no {kind} of yours has an id starting with {text}")
    more = f" and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
    raise IdError(
        "ambiguous_id",
        f"{text} is the start of {len(found)} {kind} ids: "
        f"{', '.join(found[:_SHOWN])}{more}; give more characters",
        candidates=found,
    )


def short_id_length(ids: Iterable[str], *, minimum: int = SHORT_ID) -> int:
    """The shortest length (at least `minimum`) at which every distinct id of `ids` has a
    prefix of its own; one length for a whole column, so ids line up."""
    distinct = sorted(set(ids))
    length = minimum
    for before, after in itertools.pairwise(distinct):
        common = 0
        for a, b in zip(before, after, strict=False):
            if a != b:
                break
            common += 1
        length = max(length, common + 1)
    return length


def shortener(ids: Iterable[str], *, minimum: int = SHORT_ID) -> Callable[[str], str]:
    """A function that shortens each id of a table to its column's unique prefix (other
    values, such as an empty id, pass unchanged)."""
    length = short_id_length([i for i in ids if FULL_ID.match(i)], minimum=minimum)

    def shorten(value: str) -> str:
        return value[:length] if FULL_ID.match(value) else value

    return shorten
