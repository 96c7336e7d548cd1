"""Prometheus metrics: the helpers every app's `metrics.py` declares its metrics with, the
scrape-time collectors, the exposition and the platform's own (HTTP) metrics.

Every process (gunicorn workers, qcluster workers, watchers) writes its samples to files in
`PROMETHEUS_MULTIPROC_DIR` (prometheus-client's multiprocess mode; set up in settings); the
`/metrics` view sums them with `MultiProcessCollector` and adds the values the scrape-time
collectors read from the database at that moment (queue depth, heartbeat ages, ...).

Rules for every metric: named `yoyaku_...` in base units (`_seconds`, `_bytes`,
`_total` for counters); label values from a small fixed set (a route name, a status class,
an error code — never a user id or an object id); counted where the event happens (a
service), declared in the app's own `metrics.py`. With `METRICS_ENABLED` off every metric is a
no-op object and `/metrics` answers 404.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Self, cast

from django.conf import settings
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

from apps.core.exceptions import DomainError
from apps.core.ops_summary import OpsRow, register_ops_section

logger = logging.getLogger(__name__)

# Request and task durations: 5 ms .. 60 s.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class _NullMetric:
    """What a metric is with METRICS_ENABLED off: accepts every call, records nothing."""

    def labels(self, *values: object, **labels: object) -> Self:
        return self

    def inc(self, amount: float = 1) -> None:
        return None

    def observe(self, amount: float) -> None:
        return None


_NULL = _NullMetric()


def metrics_enabled() -> bool:
    return bool(getattr(settings, "METRICS_ENABLED", True))


def _check_name(name: str) -> None:
    if not name.startswith("yoyaku_"):
        raise ValueError(f"metric {name!r}: every metric is named yoyaku_*")


def counter(
    name: str,
    documentation: str,
    labelnames: Sequence[str] = (),
    *,
    initial: Iterable[Sequence[str]] = (),
) -> Counter:
    """A counter (`name` ends in `_total` as exposed; pass it with the suffix). `initial`
    label tuples are created at 0 so their series exist before the first event (rates and
    alerts then see a 0, not a missing series)."""
    _check_name(name)
    if not metrics_enabled():
        return cast(Counter, _NULL)
    metric = Counter(name, documentation, labelnames, registry=None)
    for values in initial:
        metric.labels(*values)
    return metric


def histogram(
    name: str,
    documentation: str,
    labelnames: Sequence[str] = (),
    *,
    buckets: Sequence[float] = DURATION_BUCKETS,
    initial: Iterable[Sequence[str]] = (),
) -> Histogram:
    _check_name(name)
    if not metrics_enabled():
        return cast(Histogram, _NULL)
    metric = Histogram(name, documentation, labelnames, buckets=buckets, registry=None)
    for values in initial:
        metric.labels(*values)
    return metric


class count_refusals:  # noqa: N801 - used as a context manager, read as a function
    """Context manager: a DomainError leaving the block is counted once on `metric` with its
    error code as the only label (then re-raised). Nested blocks counting on the same metric
    count it once (the exception is marked), so a service may call another counted service."""

    def __init__(self, metric: Counter) -> None:
        self.metric = metric

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: object
    ) -> None:
        if not isinstance(error, DomainError):
            return
        marks: frozenset[int] = getattr(error, "_yoyaku_counted", frozenset())
        if id(self.metric) in marks:
            return
        error._yoyaku_counted = marks | {id(self.metric)}  # type: ignore[attr-defined]
        self.metric.labels(error.code).inc()


# --- scrape-time collectors --------------------------------------------------------------------

ScrapeCollector = Callable[[], Iterable[Metric]]
_SCRAPE_COLLECTORS: dict[str, ScrapeCollector] = {}


def register_scrape_collector(name: str, collect: ScrapeCollector) -> None:
    """`collect()` yields metric families read at scrape time (one cheap, index-backed query
    each). A collector that raises is logged and reported by `yoyaku_scrape_errors`; the
    others still answer."""
    _SCRAPE_COLLECTORS[name] = collect


def gauge(name: str, documentation: str, value: float | None) -> GaugeMetricFamily:
    """A one-sample gauge family for a scrape-time collector (no sample when `value` is None)."""
    _check_name(name)
    family = GaugeMetricFamily(name, documentation)
    if value is not None:
        family.add_metric([], value)
    return family


class _ScrapeCollectors:
    def collect(self) -> Iterable[Metric]:
        errors = GaugeMetricFamily(
            "yoyaku_scrape_errors",
            "1 for each scrape-time collector that failed during this scrape.",
            labels=["collector"],
        )
        started = time.monotonic()
        for name, collect in sorted(_SCRAPE_COLLECTORS.items()):
            try:
                families = list(collect())
            except Exception:
                logger.exception("metrics: the %s collector failed", name)
                errors.add_metric([name], 1)
                continue
            errors.add_metric([name], 0)
            yield from families
        yield errors
        yield gauge(
            "yoyaku_scrape_collectors_duration_seconds",
            "Time the scrape-time collectors took to read the database for this scrape.",
            time.monotonic() - started,
        )


def metrics_exposition() -> bytes:
    """The Prometheus text exposition of every process's metrics plus the scrape-time ones.

    A fresh registry per scrape (prometheus-client's recipe for multiprocess mode): the files'
    collector and ours, and nothing else, so every metric exposed is a `yoyaku_*` one.
    """
    registry = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(registry, path=settings.PROMETHEUS_MULTIPROC_DIR)
    registry.register(cast(Any, _ScrapeCollectors()))
    return generate_latest(registry)


def metrics_sample_sum(name: str, **labels: str) -> float:
    """The sum over every process of the samples of `name` whose labels include `labels`
    (the /ops/ page reads counters this way, without an HTTP round-trip)."""
    registry = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(registry, path=settings.PROMETHEUS_MULTIPROC_DIR)
    total = 0.0
    for family in registry.collect():
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


# --- the platform's own metrics: HTTP --------------------------------------------------------

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

HTTP_REQUESTS = counter(
    "yoyaku_http_requests_total",
    "HTTP requests answered, by route name, method and status class (2xx, 4xx, 5xx, ...).",
    ["route", "method", "status_class"],
)
HTTP_DURATION = histogram(
    "yoyaku_http_request_duration_seconds",
    "Time from the request reaching Django to its response, by route name and method.",
    ["route", "method"],
)
TASK_ENQUEUE_FAILURES = counter(
    "yoyaku_task_enqueue_failures_total",
    "Tasks the broker refused after the transaction that asked for them committed (the work "
    "is found again by its reaper), by task.",
    ["task"],
)


# The status classes created at 0 for every (route, method) this process has answered, so the
# 5xx share (YoyakuHigh5xxRate, the dashboard's 5xx panel) is 0 on a healthy server, not "no
# data".
STATUS_CLASSES = ("2xx", "4xx", "5xx")
_routes_seen: set[tuple[str, str]] = set()


def http_request_observe(*, route: str, method: str, status: int, seconds: float) -> None:
    method = method if method in METHODS else "other"
    if (route, method) not in _routes_seen:
        _routes_seen.add((route, method))
        for status_class in STATUS_CLASSES:
            HTTP_REQUESTS.labels(route, method, status_class)
    HTTP_REQUESTS.labels(route, method, f"{status // 100}xx").inc()
    HTTP_DURATION.labels(route, method).observe(seconds)


def _http_ops_section(now: dt.datetime) -> list[OpsRow]:
    if not metrics_enabled():
        return [OpsRow("HTTP metrics", "off (METRICS_ENABLED=false)")]
    total = metrics_sample_sum("yoyaku_http_requests_total")
    errors = metrics_sample_sum("yoyaku_http_requests_total", status_class="5xx")
    share = f" ({errors / total:.1%})" if total else ""
    return [
        OpsRow(
            "Requests answered (this host, since the metrics folder was cleaned)", f"{total:.0f}"
        ),
        OpsRow(
            "5xx answers (this host, since the metrics folder was cleaned)",
            f"{errors:.0f}{share}",
            "bad" if total and errors / total > 0.1 else "",
        ),
    ]


register_ops_section("HTTP", _http_ops_section, order=90)
