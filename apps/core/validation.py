"""Input rules shared by every app. Plain Python, no Django."""

from __future__ import annotations

from typing import Any

NUL = "\x00"
NUL_MESSAGE = "NUL characters are not allowed."


def contains_nul(value: Any) -> bool:
    """True when `value` (text, or JSON-like data: dict keys and values, list items, nested)
    holds a NUL character anywhere. PostgreSQL refuses NUL in text and JSON; SQLite stores it,
    so every input that reaches the database is checked here first and refused the same way on
    both."""
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict):
        return any(contains_nul(k) or contains_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(contains_nul(item) for item in value)
    return False
