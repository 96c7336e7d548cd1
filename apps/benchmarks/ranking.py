"""Sort keys of leaderboard rows (SPEC §11.3): a row ranks by the primary metric in its
direction, then the other metrics in order, then the earlier submission.

`metric_key` concatenates one fixed-width, order-preserving code per metric (IEEE-754 bits
turned so that unsigned order is numeric order, inverted for `max` metrics), primary first:
the smaller key is the better row, and equal keys are a full tie (a shared rank). `order_key`
appends the submission time and id, so it is unique and total. Both are plain strings that a
B-tree index orders the same way on SQLite and PostgreSQL.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

_MASK = (1 << 64) - 1
_SIGN = 1 << 63
CODE_WIDTH = 16


def _code(value: float, direction: str) -> str:
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number")
    (bits,) = struct.unpack(">Q", struct.pack(">d", value + 0.0))  # -0.0 → 0.0
    ordered = (~bits & _MASK) if bits & _SIGN else bits | _SIGN
    if direction == "max":
        ordered = ~ordered & _MASK
    return f"{ordered:016x}"


def metric_key(values: Mapping[str, float], metrics: Sequence[tuple[str, str]]) -> str:
    """The key of `values` for `metrics` [(key, direction)] in ranking order (primary
    first). Raises KeyError or ValueError for a missing or non-finite metric."""
    return "".join(_code(float(values[key]), direction) for key, direction in metrics)


def order_key(metric: str, submitted_at: datetime, tie: str) -> str:
    """`metric` then the submission time (UTC, microseconds) then `tie` (an id)."""
    moment = submitted_at.astimezone(UTC).strftime("%Y%m%d%H%M%S%f")
    return f"{metric}{moment}{tie}"


def ranking_metrics(metrics: Sequence[tuple[str, str]], primary: str) -> list[tuple[str, str]]:
    """`metrics` [(key, direction)] in bundle order, reordered with `primary` first."""
    first = [m for m in metrics if m[0] == primary]
    return first + [m for m in metrics if m[0] != primary]
