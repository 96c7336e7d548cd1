"""The staff page's headline numbers (`/ops/`): each app registers a section that reads its
figures from the database (cheap, index-backed queries) or from the metric files."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from django.utils import timezone


@dataclass(frozen=True)
class OpsRow:
    label: str
    value: str
    # "bad" marks a figure past its alert threshold (shown highlighted).
    state: str = ""


OpsSection = Callable[[dt.datetime], list[OpsRow]]
_SECTIONS: dict[str, tuple[int, OpsSection]] = {}


def register_ops_section(title: str, section: OpsSection, *, order: int) -> None:
    _SECTIONS[title] = (order, section)


def ops_summary(*, now: dt.datetime | None = None) -> list[tuple[str, list[OpsRow]]]:
    """[(section title, rows)] in the sections' order."""
    moment = now or timezone.now()
    ordered = sorted(_SECTIONS.items(), key=lambda item: item[1][0])
    return [(title, section(moment)) for title, (_, section) in ordered]


def format_age(seconds: float | None) -> str:
    """`42 s`, `3 min 5 s`, `2 h 10 min`, or `none`."""
    if seconds is None:
        return "none"
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def format_ms(seconds: float | None) -> str:
    return "none" if seconds is None else f"{seconds * 1000:.0f} ms"
