"""Metrics of the schedule app: plans fired and their lateness, webhook attempts, retries,
invalidated plans (SPEC §6), with the scrape-time collector of watcher heartbeats and fired
plans waiting for a worker."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable

from django.conf import settings
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from apps.core.metrics import counter, gauge, histogram, register_scrape_collector
from apps.core.ops_summary import OpsRow, format_age, format_ms, register_ops_section

KINDS = ("birth", "death")
STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx", "refused")
# Lateness buckets from 10 ms (a timer's precision) to BIRTH_DELAY_LIMIT_TIME (3 min).
LATENESS_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 180.0)
# A watcher silent this long is left out of the per-watcher gauge (it stopped or was replaced).
WATCHER_FORGET_AFTER = dt.timedelta(hours=1)

PLANS_FIRED = counter(
    "yoyaku_schedule_plans_fired_total",
    "Plan deliveries started on a worker (each attempt of a plan), by plan kind.",
    ["kind"],
    initial=[(kind,) for kind in KINDS],
)
PLAN_LATENESS = histogram(
    "yoyaku_schedule_plan_lateness_seconds",
    "Actual start of a plan's action minus its due time, by plan kind.",
    ["kind"],
    buckets=LATENESS_BUCKETS,
    initial=[(kind,) for kind in KINDS],
)
ACTION_ATTEMPTS = counter(
    "yoyaku_schedule_action_attempts_total",
    "Webhook attempts by plan kind, attempt (first, or retry: a plan's later attempts) and "
    "status class (599, a connection error or timeout, is 5xx; refused: the target was "
    "refused before any request).",
    ["kind", "attempt", "status_class"],
    initial=[
        (kind, attempt, cls)
        for kind in KINDS
        for attempt in ("first", "retry")
        for cls in STATUS_CLASSES
    ],
)
ACTION_RETRIES = counter(
    "yoyaku_schedule_action_retries_total",
    "Failed attempts that scheduled a retry of the plan, by plan kind.",
    ["kind"],
    initial=[(kind,) for kind in KINDS],
)
PLANS_FINISHED = counter(
    "yoyaku_schedule_plans_finished_total",
    "Plans that ended, by kind and outcome: done, failed (retries exhausted), skipped (its "
    "Life moved on before it ran).",
    ["kind", "outcome"],
    initial=[(kind, outcome) for kind in KINDS for outcome in ("done", "failed", "skipped")],
)
PLANS_INVALIDATED = counter(
    "yoyaku_schedule_plans_invalidated_total",
    "Plans that missed their window (never attempted within BIRTH_DELAY_LIMIT_TIME of their "
    "time) and were invalidated, by plan kind.",
    ["kind"],
    initial=[(kind,) for kind in KINDS],
)


def status_class(status_code: int | None) -> str:
    return "refused" if status_code is None else f"{min(max(status_code // 100, 1), 5)}xx"


def plan_fired(*, kind: str, lateness: dt.timedelta) -> None:
    PLANS_FIRED.labels(kind).inc()
    PLAN_LATENESS.labels(kind).observe(max(0.0, lateness.total_seconds()))


def plan_attempt_recorded(*, kind: str, number: int, status_code: int | None, result: str) -> None:
    """Attempt `number` (1 = first) recorded with what followed: done, retry, failed."""
    attempt = "first" if number <= 1 else "retry"
    ACTION_ATTEMPTS.labels(kind, attempt, status_class(status_code)).inc()
    if result == "retry":
        ACTION_RETRIES.labels(kind).inc()
    else:
        PLANS_FINISHED.labels(kind, result).inc()


def plan_skipped(*, kind: str) -> None:
    PLANS_FINISHED.labels(kind, "skipped").inc()


def plans_invalidated(*, kind: str, count: int = 1) -> None:
    PLANS_INVALIDATED.labels(kind).inc(count)


# --- read at scrape time ---------------------------------------------------------------------


def schedule_collect() -> Iterable[Metric]:
    """Watcher heartbeats (a handful of rows) and the fired plans waiting for a worker (an
    aggregate over the partial index `schedule_plan_pending_idx`)."""
    from apps.schedule.selectors import plans_waiting_count, watcher_heartbeats

    now = timezone.now()
    per_watcher = GaugeMetricFamily(
        "yoyaku_schedule_watcher_heartbeat_age_seconds",
        "Seconds since each running plan watcher's last tick (a watcher silent for an hour, or "
        "stopped cleanly, is left out).",
        labels=["watcher"],
    )
    beats = watcher_heartbeats()
    last: dt.datetime | None = None
    for name, tick in beats:
        if name is None:
            last = tick
        elif now - tick <= WATCHER_FORGET_AFTER:
            per_watcher.add_metric([name], max(0.0, (now - tick).total_seconds()))
    yield per_watcher
    yield gauge(
        "yoyaku_schedule_watcher_last_heartbeat_age_seconds",
        "Seconds since any plan watcher last ticked (no sample before the first tick).",
        None if last is None else max(0.0, (now - last).total_seconds()),
    )
    yield gauge(
        "yoyaku_schedule_watch_interval_seconds",
        "BOOKING_PLAN_WATCH_INTERVAL: a watcher ticks this often.",
        float(settings.BOOKING_PLAN_WATCH_INTERVAL) / 1000,
    )
    yield gauge(
        "yoyaku_schedule_plans_waiting",
        "Plans due (armed and past their time) that no worker has started yet.",
        plans_waiting_count(now=now),
    )


register_scrape_collector("schedule", schedule_collect)


def _schedule_ops(now: dt.datetime) -> list[OpsRow]:
    from apps.schedule.selectors import (
        plan_lateness_since,
        plans_waiting_count,
        watcher_heartbeats,
    )

    interval = float(settings.BOOKING_PLAN_WATCH_INTERVAL) / 1000
    stale_after = max(3 * interval, 30.0)
    rows: list[OpsRow] = []
    seen_any = False
    for name, tick in watcher_heartbeats():
        age = (now - tick).total_seconds()
        if name is None:
            seen_any = True
            rows.insert(
                0,
                OpsRow(
                    "Last watcher heartbeat (any watcher)",
                    f"{format_age(age)} ago",
                    "bad" if age > stale_after else "",
                ),
            )
        elif now - tick <= WATCHER_FORGET_AFTER:
            rows.append(
                OpsRow(
                    f"Watcher {name}", f"{format_age(age)} ago", "bad" if age > stale_after else ""
                )
            )
    if not seen_any:
        rows.insert(0, OpsRow("Last watcher heartbeat (any watcher)", "never", "bad"))
    lateness = plan_lateness_since(since=now - dt.timedelta(hours=1))
    p50, p99 = _percentile(lateness, 0.5), _percentile(lateness, 0.99)
    rows += [
        OpsRow("Plans started in the last hour", str(len(lateness))),
        OpsRow("Plan lateness p50 (last hour)", format_ms(p50)),
        OpsRow("Plan lateness p99 (last hour)", format_ms(p99), "bad" if p99 and p99 > 1 else ""),
        OpsRow("Fired plans waiting for a worker", str(plans_waiting_count(now=now))),
    ]
    return rows


def _percentile(values: list[float], share: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = min(max(1, math.ceil(share * len(ordered))), len(ordered))
    return ordered[rank - 1]


register_ops_section("Schedule", _schedule_ops, order=20)
