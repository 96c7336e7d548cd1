"""Rescores (SPEC §11.6): which version a phase's leaderboard serves while a newer one is
scored, and the hosts' controls.

- `rescore_begin`: a bundle made version n+1 of an existing phase (in the apply's
  transaction): a `Rescore` with one item per counted, completed entry and per baseline
  (a database constraint keeps one per entry or baseline); running rescores of older
  versions are superseded. With nothing to score it switches at once.
- `rescore_switch_if_complete`: once no item is pending or processing, one transaction
  marks the rescore `switched` and moves `Phase.scoring_version` up (a conditional UPDATE
  that never lowers it). A leaderboard response reads the version once, then only rows of
  that version, so each answer is all-old or all-new.
- `rescore_entry_add`: an entry scored in an older version than the phase's newest live
  rescore (graded while the rescore ran) gets an item too, in its result's transaction.
- `rescore_retry` / `rescore_cancel`: a host sends failed items back to `pending`, or
  cancels a running rescore (the leaderboard stays on the version it serves).

Rescoring writes only scores and its own rows: never `counted`, never a limit's use.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from apps.benchmarks.exceptions import RescoreNotRunning
from apps.benchmarks.models import (
    Baseline,
    Entry,
    Phase,
    Rescore,
    RescoreItem,
    RescoreItemStatus,
    RescoreState,
)
from apps.benchmarks.selectors import challenge_get_visible, challenge_may_manage
from apps.core.exceptions import NotFound, PermissionDenied
from apps.core.queue import RESCORE_NEXT, enqueue_on_commit
from apps.submissions.models import SubmissionStatus

LIVE = (RescoreState.RUNNING, RescoreState.SWITCHED)
OPEN = (RescoreItemStatus.PENDING, RescoreItemStatus.PROCESSING)


@dataclass(frozen=True)
class RescoreProgress:
    version: int
    state: str
    scoring_version: int
    done: int
    failed: int
    total: int


def rescore_workers() -> int:
    """How many work chains one rescore runs at once (RESCORE_WORKERS, at least 1)."""
    return max(1, int(settings.RESCORE_WORKERS))


def rescore_chains_enqueue(*, rescore_id: int, chains: int | None = None) -> None:
    """After commit, start `chains` (default RESCORE_WORKERS) work chains of the rescore."""
    for _ in range(rescore_workers() if chains is None else chains):
        enqueue_on_commit(RESCORE_NEXT, rescore_id)


def rescore_begin(*, phase: Phase, version: int) -> Rescore:
    """Start rescoring `phase` in `version` (the apply's transaction; the challenge row is
    locked). Supersedes older running rescores of the phase."""
    now = timezone.now()
    Rescore.objects.filter(phase=phase, state=RescoreState.RUNNING).update(
        state=RescoreState.SUPERSEDED, finished_at=now
    )
    rescore = Rescore.objects.create(phase=phase, version=version)
    entries = Entry.objects.filter(
        phase=phase, counted=True, submission__status=SubmissionStatus.COMPLETED
    ).values_list("pk", flat=True)
    baselines = Baseline.objects.filter(phase=phase).values_list("pk", flat=True)
    items = [RescoreItem(rescore=rescore, entry_id=pk) for pk in entries.order_by("pk")]
    items += [RescoreItem(rescore=rescore, baseline_id=pk) for pk in baselines.order_by("pk")]
    RescoreItem.objects.bulk_create(items, batch_size=500)
    if items:
        rescore_chains_enqueue(rescore_id=rescore.pk)
    else:
        rescore_switch_if_complete(rescore_id=rescore.pk)
    return rescore


def rescore_switch_if_complete(*, rescore_id: int) -> bool:
    """Switch the leaderboard to the rescore's version if no item is left open; True if this
    call switched it. One transaction: the rescore's conditional UPDATE, then the phase's.
    While items are open (nearly every call of a running rescore) one read answers, with no
    transaction or lock; the check is repeated under the lock before switching."""
    if RescoreItem.objects.filter(rescore_id=rescore_id, status__in=OPEN).exists():
        return False
    with transaction.atomic():
        rescore = (
            Rescore.objects.select_for_update()
            .filter(pk=rescore_id, state=RescoreState.RUNNING)
            .first()
        )
        if rescore is None or rescore.items.filter(status__in=OPEN).exists():
            return False
        moved = Rescore.objects.filter(pk=rescore_id, state=RescoreState.RUNNING).update(
            state=RescoreState.SWITCHED, finished_at=timezone.now()
        )
        if moved:
            Phase.objects.filter(pk=rescore.phase_id, scoring_version__lt=rescore.version).update(
                scoring_version=rescore.version
            )
        return bool(moved)


def rescore_entry_add(*, entry: Entry, version: int) -> bool:
    """An entry just scored in `version` (inside its result's transaction): if the phase has
    a live rescore of a newer version, give the entry an item in it (once). True if added."""
    rescore = (
        Rescore.objects.filter(phase_id=entry.phase_id, state__in=LIVE, version__gt=version)
        .order_by("-version")
        .first()
    )
    if rescore is None:
        return False
    try:
        with transaction.atomic():
            RescoreItem.objects.create(rescore=rescore, entry=entry)
    except IntegrityError:
        return False
    rescore_chains_enqueue(rescore_id=rescore.pk, chains=1)
    return True


def _host_phase(*, user: AbstractBaseUser, slug: str, phase_slug: str) -> Phase:
    challenge = challenge_get_visible(slug=slug, user=user)
    if not challenge_may_manage(challenge=challenge, user=user):
        raise PermissionDenied("Only the challenge's hosts (and staff) may see or change rescores.")
    phase = Phase.objects.filter(challenge=challenge, slug=phase_slug).first()
    if phase is None:
        raise NotFound("No such phase.")
    return phase


def _progress(phase: Phase) -> RescoreProgress:
    serving = Phase.objects.values_list("scoring_version", flat=True).get(pk=phase.pk)
    rescore = Rescore.objects.filter(phase=phase).order_by("-version").first()
    if rescore is None:
        return RescoreProgress(serving, "none", serving, 0, 0, 0)
    counts = rescore.items.aggregate(
        total=Count("pk"),
        done=Count("pk", filter=Q(status=RescoreItemStatus.DONE)),
        failed=Count("pk", filter=Q(status=RescoreItemStatus.FAILED)),
    )
    return RescoreProgress(
        rescore.version,
        rescore.state,
        serving,
        counts["done"],
        counts["failed"],
        counts["total"],
    )


def rescore_progress(*, user: AbstractBaseUser, slug: str, phase_slug: str) -> RescoreProgress:
    """GET .../rescore/ (hosts and staff): the phase's newest rescore; 403 for anyone else."""
    return _progress(_host_phase(user=user, slug=slug, phase_slug=phase_slug))


def rescore_retry(*, user: AbstractBaseUser, slug: str, phase_slug: str) -> RescoreProgress:
    """POST .../rescore/retry/: the newest live rescore's failed items are scored again
    (`pending`, attempts from 0). Idempotent; nothing failed → nothing changes."""
    phase = _host_phase(user=user, slug=slug, phase_slug=phase_slug)
    with transaction.atomic():
        rescore = (
            Rescore.objects.select_for_update()
            .filter(phase=phase, state__in=LIVE)
            .order_by("-version")
            .first()
        )
        if rescore is not None:
            again = RescoreItem.objects.filter(
                rescore=rescore, status=RescoreItemStatus.FAILED
            ).update(
                status=RescoreItemStatus.PENDING,
                attempts=0,
                failure="",
                lease_token="",
                lease_expires_at=None,
                finished_at=None,
            )
            if again:
                rescore_chains_enqueue(rescore_id=rescore.pk)
    return _progress(phase)


def rescore_cancel(*, user: AbstractBaseUser, slug: str, phase_slug: str) -> RescoreProgress:
    """POST .../rescore/cancel/: a running rescore stops (its items are no longer taken) and
    the leaderboard keeps the version it serves. 409 `rescore_not_running` otherwise."""
    phase = _host_phase(user=user, slug=slug, phase_slug=phase_slug)
    with transaction.atomic():
        cancelled = Rescore.objects.filter(phase=phase, state=RescoreState.RUNNING).update(
            state=RescoreState.CANCELLED, finished_at=timezone.now()
        )
    if not cancelled:
        raise RescoreNotRunning()
    return _progress(phase)
