"""Metrics of human review (SPEC §5): claims and verdicts, with the scrape-time collector of
the review queue and the /ops/ section."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from django.utils import timezone
from prometheus_client.core import Metric

from apps.core.metrics import counter, gauge, histogram, register_scrape_collector
from apps.core.ops_summary import OpsRow, format_age, register_ops_section

REVIEW_CLAIM_CONFLICTS = counter(
    "yoyaku_review_claim_conflicts_total",
    "Claims refused because another reviewer holds a live claim (409 already_claimed).",
)
REVIEW_VERDICTS = counter(
    "yoyaku_review_verdicts_total",
    "Review verdicts recorded, by verdict.",
    ["verdict"],
    initial=[("approve",), ("reject",)],
)
REVIEW_WAIT = histogram(
    "yoyaku_review_wait_seconds",
    "Time from a submission entering review_pending to its verdict.",
    buckets=(60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400),
)


def review_claim_conflict() -> None:
    REVIEW_CLAIM_CONFLICTS.inc()


def review_verdict(*, verdict: str, waited: dt.timedelta | None) -> None:
    REVIEW_VERDICTS.labels(verdict).inc()
    if waited is not None:
        REVIEW_WAIT.observe(max(0.0, waited.total_seconds()))


# --- read at scrape time ---------------------------------------------------------------------


def _age(now: dt.datetime, oldest: dt.datetime | None) -> float:
    return 0.0 if oldest is None else max(0.0, (now - oldest).total_seconds())


def review_queue_collect() -> Iterable[Metric]:
    """One aggregate query, served by the partial index submissions_review_pending."""
    from apps.review.selectors import review_queue_stats

    now = timezone.now()
    pending, oldest_review = review_queue_stats()
    yield gauge("yoyaku_review_queue_length", "Submissions waiting for a human review.", pending)
    yield gauge(
        "yoyaku_review_oldest_pending_age_seconds",
        "Time the oldest review_pending submission has waited (0 when none waits).",
        _age(now, oldest_review),
    )


register_scrape_collector("review_queue", review_queue_collect)


def _review_ops(now: dt.datetime) -> list[OpsRow]:
    from apps.review.selectors import review_queue_stats

    pending, oldest_review = review_queue_stats()
    return [
        OpsRow("Submissions waiting for review", str(pending)),
        OpsRow(
            "Oldest waiting review",
            format_age(None if oldest_review is None else _age(now, oldest_review)),
        ),
    ]


register_ops_section("Review", _review_ops, order=11)
