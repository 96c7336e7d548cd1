"""Metrics of the benchmarks app: phase limit refusals and refunds (SPEC §11.4)."""

from __future__ import annotations

from functools import partial

from django.db import transaction

from apps.core.metrics import counter

LIMITS = ("per_day", "total", "concurrent")
REFUND_REASONS = ("cancelled", "worker_lost", "scoring_failed")

PHASE_LIMIT_REFUSALS = counter(
    "yoyaku_phase_limit_refusals_total",
    "Enqueues of phase submissions refused by a team limit (phase_limit_exceeded), by limit.",
    ["limit"],
    initial=[(limit,) for limit in LIMITS],
)
PHASE_REFUNDS = counter(
    "yoyaku_phase_refunds_total",
    "Phase submissions that stopped counting against their team's limits, by reason.",
    ["reason"],
    initial=[(reason,) for reason in REFUND_REASONS],
)


def phase_limit_refused(*, limit: str) -> None:
    PHASE_LIMIT_REFUSALS.labels(limit).inc()


def _refunded(reason: str) -> None:
    PHASE_REFUNDS.labels(reason).inc()


def phase_refunded_on_commit(*, reason: str) -> None:
    """Count a refund once the transaction that wrote it commits."""
    transaction.on_commit(partial(_refunded, reason))
