"""django-q2 tasks of benchmarks. Each takes ids and is idempotent (delivery is at least once)."""

from __future__ import annotations

from apps.benchmarks.services.scoring import baseline_score as baseline_score_run


def baseline_score(baseline_id: int) -> str:
    """Score a baseline in its phase's current version unless it already is."""
    return baseline_score_run(baseline_id=baseline_id)


def rescore_next(rescore_id: int) -> str:
    """Score one open item of a rescore (SPEC §11.6), then enqueue the next."""
    from apps.benchmarks.services.rescoring import rescore_next as rescore_next_run

    return rescore_next_run(rescore_id=rescore_id)


def rescores_reap_periodic() -> int:
    """Every minute: restart the work of rescores whose chains were lost."""
    from apps.benchmarks.services.rescoring import rescores_reap

    return rescores_reap()
