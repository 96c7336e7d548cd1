"""Metrics of grading (SPEC §5): leases, outcomes and durations, with the scrape-time
collector of the grading queue and the /ops/ section."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from django.conf import settings
from django.utils import timezone
from prometheus_client.core import Metric

from apps.core.metrics import counter, gauge, histogram, register_scrape_collector
from apps.core.ops_summary import OpsRow, format_age, register_ops_section

GRADING_OUTCOMES = ("completed", "review_pending", "failed", "lease_lost", "exhausted")
SKIP_REASONS = ("unknown_job", "job_finished", "submission_finished", "live_lease", "not_pending")

GRADINGS = counter(
    "yoyaku_gradings_total",
    "Gradings that ended, by outcome: completed, review_pending, failed (the program failed, "
    "timed out, or could not run), lease_lost (result discarded: the lease was taken over or "
    "cancelled), exhausted (GRADING_MAX_ATTEMPTS attempts without a result).",
    ["outcome"],
    initial=[(outcome,) for outcome in GRADING_OUTCOMES],
)
GRADING_DURATION = histogram(
    "yoyaku_grading_duration_seconds",
    "Time the grader ran (files copied in, the program, its result read), by outcome.",
    ["outcome"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200),
    initial=[(outcome,) for outcome in GRADING_OUTCOMES[:4]],
)
GRADING_ATTEMPTS = counter(
    "yoyaku_grading_attempts_total",
    "Processing leases taken: each is one grading attempt of a submission.",
)
LEASE_TAKEOVERS = counter(
    "yoyaku_grading_lease_takeovers_total",
    "Expired processing leases taken over by a new delivery (a worker died or stalled).",
)
DELIVERIES_SKIPPED = counter(
    "yoyaku_grading_deliveries_skipped_total",
    "Grading deliveries that did nothing (duplicates and late deliveries), by reason.",
    ["reason"],
    initial=[(reason,) for reason in SKIP_REASONS],
)


def grading_ended(*, outcome: str, seconds: float | None = None) -> None:
    GRADINGS.labels(outcome).inc()
    if seconds is not None:
        GRADING_DURATION.labels(outcome).observe(seconds)


def grading_attempt_started(*, takeover: bool) -> None:
    GRADING_ATTEMPTS.inc()
    if takeover:
        LEASE_TAKEOVERS.inc()


def grading_skipped(*, reason: str) -> None:
    DELIVERIES_SKIPPED.labels(reason).inc()


# --- read at scrape time ---------------------------------------------------------------------


def _age(now: dt.datetime, oldest: dt.datetime | None) -> float:
    return 0.0 if oldest is None else max(0.0, (now - oldest).total_seconds())


def grading_queue_collect() -> Iterable[Metric]:
    """One aggregate query, served by the partial index jobs_queued_created."""
    from apps.jobs.selectors import job_queue_stats

    now = timezone.now()
    queued, oldest_job = job_queue_stats()
    yield gauge("yoyaku_grading_queue_depth", "Jobs queued, waiting for a grading worker.", queued)
    yield gauge(
        "yoyaku_grading_oldest_queued_age_seconds",
        "Age of the oldest queued job (0 when none is queued).",
        _age(now, oldest_job),
    )
    yield gauge(
        "yoyaku_grading_queue_retry_seconds",
        "The broker's re-delivery window (Q_RETRY): a job queued longer was lost or is stuck.",
        float(settings.Q_CLUSTER.get("retry", 60)),
    )


register_scrape_collector("grading_queue", grading_queue_collect)


def _grading_ops(now: dt.datetime) -> list[OpsRow]:
    from apps.grading.selectors import grading_outcomes_since
    from apps.jobs.selectors import job_queue_stats

    queued, oldest_job = job_queue_stats()
    age = None if oldest_job is None else _age(now, oldest_job)
    retry = float(settings.Q_CLUSTER.get("retry", 60))
    outcomes = grading_outcomes_since(since=now - dt.timedelta(hours=1))
    total = sum(outcomes.values())
    failures = outcomes.get("failed", 0) + outcomes.get("abandoned", 0)
    return [
        OpsRow("Jobs queued", str(queued)),
        OpsRow("Oldest queued job", format_age(age), "bad" if age and age > retry else ""),
        OpsRow("Gradings finished in the last hour", str(total)),
        OpsRow(
            "Failed or abandoned in the last hour",
            str(failures),
            "bad" if total and failures / total > 0.2 else "",
        ),
    ]


register_ops_section("Grading", _grading_ops, order=10)
