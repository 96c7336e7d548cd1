"""What a rescore item needs besides its own row, read in as few queries as possible
(SPEC §11.6): the item with its rescore, entry (phase, challenge, submission) or baseline in
one query, and the scoring plan of the rescore's version, kept per worker process (with the
name of the version's bundle: a version's row never changes).

A version's plan (its scoring program and reference data, the phase's splits, metrics and
resources) only changes when a bundle is applied, and every apply that changes anything
stores a new bundle under a new name with a new digest. So the cache key is the phase, the
version, the version's bundle and the challenge's current bundle (name and digest): an apply
that keeps the version but changes a metric or a timeout is a different key, never a stale
plan.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from apps.benchmarks.models import Phase, RescoreItem, ScoringVersion
from apps.benchmarks.services.scores import phase_ranking_metrics
from apps.benchmarks.services.scoring import phase_scoring_plan
from apps.benchmarks.services.team_best import phase_splits
from apps.grading.phases import ScoringPlan

_KEPT = 64  # plans kept per process (one per live version is all a worker needs)


@dataclass(frozen=True)
class RescorePlan:
    plan: ScoringPlan
    # The phase's (metric, direction) pairs in ranking order (`phase_ranking_metrics`).
    metrics: tuple[tuple[str, str], ...]
    # The phase's (split name, hidden) pairs (`phase_splits`).
    splits: tuple[tuple[str, bool], ...] = ()


_plans: dict[tuple[str, int, str, str, str], RescorePlan] = {}
_bundles: dict[tuple[str, int], str] = {}
_lock = threading.Lock()


def _version_bundle(*, phase_id: str, version: int) -> str:
    """The bundle a scoring version was made from: a version's row never changes, so it is
    read once per process."""
    key = (phase_id, version)
    with _lock:
        found = _bundles.get(key)
    if found is None:
        rows = ScoringVersion.objects.filter(phase_id=phase_id, number=version)
        found = rows.values_list("bundle_file", flat=True).first() or ""
        if found:
            with _lock:
                if len(_bundles) >= _KEPT:
                    _bundles.clear()
                _bundles[key] = found
    return found


def rescore_item_load(*, item_id: int, of_entry: bool | None = None) -> RescoreItem:
    """The item with everything scoring it reads, in one query (`version_bundle` set: the
    bundle of the rescore's version). `of_entry`: whether the item is an entry's (True) or a
    baseline's (False), when the caller knows: only that side is joined (None: both)."""
    related = ["rescore"]
    if of_entry is not False:
        related += ["entry", "entry__phase", "entry__phase__challenge", "entry__submission"]
    if of_entry is not True:
        related += ["baseline", "baseline__phase", "baseline__phase__challenge"]
    item = RescoreItem.objects.select_related(*related).get(pk=item_id)
    rescore = item.rescore
    item.version_bundle = _version_bundle(  # type: ignore[attr-defined]
        phase_id=rescore.phase_id, version=rescore.version
    )
    return item


def rescore_plan(*, phase: Phase, version: int, version_bundle: str) -> RescorePlan:
    """The plan of `phase` (loaded with its challenge) in `version`, cached (module doc)."""
    challenge = phase.challenge
    key = (phase.pk, version, version_bundle, challenge.bundle_file, challenge.bundle_sha256)
    with _lock:
        found = _plans.get(key)
    if found is not None:
        return found
    plan = phase_scoring_plan(phase, bundle_file=challenge.bundle_file, version_number=version)
    found = RescorePlan(
        plan=plan, metrics=tuple(phase_ranking_metrics(phase)), splits=tuple(phase_splits(phase))
    )
    with _lock:
        if len(_plans) >= _KEPT:
            _plans.clear()
        _plans[key] = found
    return found


def rescore_plan_for(
    *, phase_id: str, version: int, bundle_file: str, bundle_sha256: str
) -> RescorePlan:
    """`rescore_plan` from ids (the challenge's current bundle name and digest): the phase is
    read only when the plan is not kept yet."""
    bundle = _version_bundle(phase_id=phase_id, version=version)
    with _lock:
        found = _plans.get((phase_id, version, bundle, bundle_file, bundle_sha256))
    if found is not None:
        return found
    phase = Phase.objects.select_related("challenge").get(pk=phase_id)
    return rescore_plan(phase=phase, version=version, version_bundle=bundle)
