"""django-q2 tasks of the reveal (SPEC §11.3): idempotent, each calls one service."""

from __future__ import annotations

from apps.benchmarks.services.reveal import phases_reveal_overdue


def phases_reveal_overdue_periodic() -> int:
    """Every minute: reveal the hidden phases whose reservation did not reveal them on time."""
    return phases_reveal_overdue()
