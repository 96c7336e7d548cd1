"""The one error an archive check or unpacking raises."""

from __future__ import annotations

UNSAFE = "unsafe"
INVALID = "invalid"


class ArchiveError(Exception):
    """`kind` is `unsafe` (refused by a rule) or `invalid` (cannot be read)."""

    def __init__(self, message: str, *, kind: str, member: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.member = member
