"""What a rescore item needs besides its own row, read in as few queries as possible
(SPEC §11.6): the item with its rescore, entry (phase, challenge, submission) or baseline in
one query, and the scoring plan of the rescore's version, kept per worker process.

A version's plan (its scoring program and reference data, the phase's splits, metrics and
resources) only changes when a bundle is applied, and every apply that changes anything
stores a new bundle under a new name with a new digest. So the cache key is the phase, the
version, the version's bundle and the challenge's current bundle (name and digest): an apply
that keeps the version but changes a metric or a timeout is a different key, never a stale
plan. The item query reads the version's bundle name with a subquery (no extra round trip).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from django.db.models import OuterRef, Subquery

from apps.benchmarks.models import Phase, RescoreItem, ScoringVersion
from apps.benchmarks.services.scores import phase_ranking_metrics
from apps.benchmarks.services.scoring import phase_scoring_plan
from apps.grading.phases import ScoringPlan

_KEPT = 64  # plans kept per process (one per live version is all a worker needs)


@dataclass(frozen=True)
class RescorePlan:
    plan: ScoringPlan
    # The phase's (metric, direction) pairs in ranking order (`phase_ranking_metrics`).
    metrics: tuple[tuple[str, str], ...]


_plans: dict[tuple[str, int, str, str, str], RescorePlan] = {}
_lock = threading.Lock()


def rescore_item_load(*, item_id: int) -> RescoreItem:
    """The item with everything scoring it reads, in one query (`version_bundle` annotated)."""
    version_bundle = ScoringVersion.objects.filter(
        phase_id=OuterRef("rescore__phase_id"), number=OuterRef("rescore__version")
    ).values("bundle_file")[:1]
    return (
        RescoreItem.objects.select_related(
            "rescore",
            "entry",
            "entry__phase",
            "entry__phase__challenge",
            "entry__submission",
            "baseline",
            "baseline__phase",
            "baseline__phase__challenge",
        )
        .annotate(version_bundle=Subquery(version_bundle))
        .get(pk=item_id)
    )


def rescore_plan(*, phase: Phase, version: int, version_bundle: str) -> RescorePlan:
    """The plan of `phase` (loaded with its challenge) in `version`, cached (module doc)."""
    challenge = phase.challenge
    key = (phase.pk, version, version_bundle, challenge.bundle_file, challenge.bundle_sha256)
    with _lock:
        found = _plans.get(key)
    if found is not None:
        return found
    plan = phase_scoring_plan(phase, bundle_file=challenge.bundle_file, version_number=version)
    found = RescorePlan(plan=plan, metrics=tuple(phase_ranking_metrics(phase)))
    with _lock:
        if len(_plans) >= _KEPT:
            _plans.clear()
        _plans[key] = found
    return found
