"""Metrics of the quotas app: denials by kind and reservations by how they ended (SPEC §3)."""

from __future__ import annotations

from apps.core.metrics import counter

DENIAL_KINDS = ("concurrent", "rate", "cost", "storage")
RESERVATION_STATES = ("created", "consumed", "released", "expired")

QUOTA_DENIALS = counter(
    "yoyaku_quota_denials_total",
    "Requests refused by a quota, by kind: concurrent (quota_exceeded), rate (rate_limited), "
    "cost (cost_limit_exceeded), storage (storage_quota_exceeded).",
    ["kind"],
    initial=[(kind,) for kind in DENIAL_KINDS],
)
RESERVATIONS = counter(
    "yoyaku_quota_reservations_total",
    "Quota reservations: created, then by final state: consumed (a job took the slot), "
    "released, expired (counted when cleanup removes it, after its expiry).",
    ["state"],
    initial=[(state,) for state in RESERVATION_STATES],
)


def quota_denied(*, kind: str) -> None:
    QUOTA_DENIALS.labels(kind).inc()


def reservation_counted(*, state: str, count: int = 1) -> None:
    RESERVATIONS.labels(state).inc(count)
