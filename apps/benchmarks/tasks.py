"""django-q2 tasks of benchmarks. Each takes ids and is idempotent (delivery is at least once)."""

from __future__ import annotations

from apps.benchmarks.services.scoring import baseline_score as baseline_score_run


def baseline_score(baseline_id: int) -> str:
    """Score a baseline in its phase's current version unless it already is."""
    return baseline_score_run(baseline_id=baseline_id)
