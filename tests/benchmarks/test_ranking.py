"""Sort keys of leaderboard rows: string order of `metric_key` is the contract's row order
(primary in its direction, then the other metrics in order), for any finite numbers."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.benchmarks.ranking import metric_key, order_key, ranking_metrics

finite = st.floats(allow_nan=False, allow_infinity=False)
DIRECTIONS = [("accuracy", "max"), ("errors", "min")]


def _better(a: dict[str, float], b: dict[str, float]) -> bool | None:
    """True when a ranks before b, False after, None on a full tie (the reference order)."""
    for key, direction in DIRECTIONS:
        x, y = a[key] + 0.0, b[key] + 0.0
        if x != y:
            return (x > y) if direction == "max" else (x < y)
    return None


@given(finite, finite, finite, finite)
def test_key_order_is_row_order(a1: float, e1: float, a2: float, e2: float) -> None:
    a, b = {"accuracy": a1, "errors": e1}, {"accuracy": a2, "errors": e2}
    ka, kb = metric_key(a, DIRECTIONS), metric_key(b, DIRECTIONS)

    expected = _better(a, b)

    if expected is None:
        assert ka == kb
    else:
        assert (ka < kb) is expected


def test_signed_zero_ties_and_extremes_order() -> None:
    values = [-1.7976931348623157e308, -1.0, -0.0, 0.0, 5e-324, 1.0]
    keys = [metric_key({"m": v}, [("m", "min")]) for v in values]

    assert keys[2] == keys[3]
    assert keys == sorted(keys)
    assert [metric_key({"m": v}, [("m", "max")]) for v in values] == sorted(
        (metric_key({"m": v}, [("m", "max")]) for v in values), reverse=True
    )


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_metric_has_no_key(bad: float) -> None:
    with pytest.raises(ValueError, match="not a finite number"):
        metric_key({"m": bad}, [("m", "max")])


def test_a_missing_metric_has_no_key() -> None:
    with pytest.raises(KeyError):
        metric_key({"accuracy": 1.0}, DIRECTIONS)


def test_order_key_breaks_a_full_tie_by_the_earlier_submission() -> None:
    key = metric_key({"accuracy": 0.5, "errors": 3.0}, DIRECTIONS)
    early = datetime(2026, 1, 1, tzinfo=UTC)
    late_elsewhere = (early + timedelta(microseconds=1)).astimezone(
        datetime.now().astimezone().tzinfo
    )

    assert order_key(key, early, "b" * 32) < order_key(key, late_elsewhere, "a" * 32)


def test_the_primary_metric_comes_first_whatever_the_bundle_order() -> None:
    assert ranking_metrics(DIRECTIONS, "errors") == [("errors", "min"), ("accuracy", "max")]
