"""Filters of the challenge pages: a metric's value at its precision, and limits as words."""

from __future__ import annotations

import math
from typing import Any

from django import template

register = template.Library()


@register.filter
def score_at(scores: dict[str, Any] | None, metric: Any) -> str:
    """`scores[metric.key]` with `metric.precision` decimals ("" when absent)."""
    if not scores or metric.key not in scores:
        return ""
    try:
        value = float(scores[metric.key])
    except (TypeError, ValueError):
        return str(scores[metric.key])
    if not math.isfinite(value):
        return str(value)
    return f"{value:.{int(metric.precision)}f}"


@register.filter
def exact_at(scores: dict[str, Any] | None, metric: Any) -> str:
    """`scores[metric.key]` as stored (the cell's title: the value before rounding)."""
    if not scores or metric.key not in scores:
        return ""
    return repr(scores[metric.key])


@register.filter
def direction_words(direction: str) -> str:
    return "higher is better" if direction == "max" else "lower is better"


@register.filter
def direction_arrow(direction: str) -> str:
    return "↑" if direction == "max" else "↓"


@register.filter
def get_item(mapping: dict[str, Any] | None, key: str) -> Any:
    return (mapping or {}).get(key, "")
