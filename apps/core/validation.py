"""Input rules shared by every app. Plain Python, no Django."""

from __future__ import annotations

import re
import unicodedata
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


# Characters that draw as `/` or `\` without being one, so that a name reads as a path it is
# not. NFKC does not map these to the real solidus (the fullwidth forms it does map are listed
# too, so the message names them).
SLASH_LOOKALIKES = frozenset(
    {
        "\u2044",  # FRACTION SLASH
        "\u2215",  # DIVISION SLASH
        "\u2216",  # SET MINUS
        "\u2571",  # BOX DRAWINGS LIGHT DIAGONAL UPPER RIGHT TO LOWER LEFT
        "\u2572",  # BOX DRAWINGS LIGHT DIAGONAL UPPER LEFT TO LOWER RIGHT
        "\u27cb",  # MATHEMATICAL RISING DIAGONAL
        "\u27cd",  # MATHEMATICAL FALLING DIAGONAL
        "\u29f5",  # REVERSE SOLIDUS OPERATOR
        "\u29f8",  # BIG SOLIDUS
        "\u29f9",  # BIG REVERSE SOLIDUS
        "\ufe68",  # SMALL REVERSE SOLIDUS
        "\uff0f",  # FULLWIDTH SOLIDUS
        "\uff3c",  # FULLWIDTH REVERSE SOLIDUS
    }
)
# Cc: controls (C0, DEL, C1); Cf: format characters (bidirectional controls such as U+202E,
# zero-width characters, soft hyphen, byte order mark); Zl / Zp: line and paragraph separators.
_HIDDEN_CATEGORIES = {
    "Cc": "a control character",
    "Cf": "a format character (bidirectional control, zero-width or other invisible character)",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}


def code_point(char: str) -> str:
    """`U+202E (RIGHT-TO-LEFT OVERRIDE)`: how a message names one character."""
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" ({name})" if name else "")


def text_display_problem(text: str) -> str | None:
    """The first character of `text` that would keep a name shown to others (a team's name on
    a public leaderboard) from reading as what it is: a control, format (bidirectional,
    zero-width), line or paragraph separator character; None when there is none."""
    for char in text:
        hidden = _HIDDEN_CATEGORIES.get(unicodedata.category(char))
        if hidden is not None:
            return f"{code_point(char)}, {hidden}"
    return None


def name_display_problem(name: str, *, path: bool = False) -> str | None:
    """What in `name` would keep it from being shown as what it is (a phrase to follow
    "contains"), or None when nothing would.

    Refused: control, format (Unicode category Cf: bidirectional controls, zero-width
    characters...), line and paragraph separator characters; look-alikes of `/` and `\\`
    (`SLASH_LOOKALIKES`); a name whose NFKC form contains `/`, `\\` or `..`. With `path`,
    `name` is a relative path whose parts `/` and `\\` separate: the NFKC rule then refuses a
    part that normalisation would turn into a separator or a `..` it does not visibly hold.
    The one rule for every name the product accepts (uploaded file names, entry point and
    config file, archive members)."""
    for char in name:
        if char in SLASH_LOOKALIKES:
            return f"{code_point(char)}, which looks like '/' or '\\'"
        hidden = _HIDDEN_CATEGORIES.get(unicodedata.category(char))
        if hidden is not None:
            return f"{code_point(char)}, {hidden}"
    parts = re.split(r"[/\\]", name) if path else [name]
    for part in parts:
        folded = unicodedata.normalize("NFKC", part)
        if path and folded == part:
            continue
        if "/" in folded or "\\" in folded or ".." in folded:
            return f"characters that read as '/', '\\' or '..' once normalised (NFKC: {folded!r})"
    return None
