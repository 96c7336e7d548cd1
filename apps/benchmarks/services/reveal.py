"""The reveal of a phase's hidden splits (SPEC §11.3): once, at its time, by the platform's
own schedule reservation; earlier by a host.

- `phase_reveal`: the one write, a compare-and-set (`revealed_at IS NULL` → now). Any number
  of concurrent callers make one reveal; the winner logs it and counts it
  (`yoyaku_benchmarks_reveals_total`), the others answer the same `revealed_at`.
- `challenge_reveals_sync` (after a bundle is applied): each phase's reservation
  (`apps.schedule.services.reservations`) is booked, moved or cancelled to match its reveal
  time; a time already past reveals at once; a removed phase's reservation is cancelled.
- `phase_reveal_request` (POST .../reveal/): hosts and staff reveal now; the reservation's own
  call reveals when the time has come.
- `phases_reveal_overdue` (every minute): a phase still hidden `OVERDUE_AFTER` past its time
  (every watcher down past the birth window, the web process down past the retries, the
  platform account deactivated) is revealed then, with a warning: the reveal can be late,
  never lost.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from apps.benchmarks.exceptions import ChallengeNotFound, RevealNotDue
from apps.benchmarks.models import Challenge, Phase, Reveal
from apps.benchmarks.selectors import challenge_get, challenge_get_visible, challenge_may_manage
from apps.core.exceptions import NotFound, PermissionDenied
from apps.core.metrics import counter
from apps.schedule.services.reservations import (
    platform_call,
    platform_reservation_set,
    platform_reservations,
)

logger = logging.getLogger(__name__)

VIA = ("schedule", "host", "overdue")
REVEALS = counter(
    "yoyaku_benchmarks_reveals_total",
    "Phases whose hidden splits were revealed, by who made the reveal: schedule (the phase's "
    "reservation, on time), host (a host or staff, early), overdue (a time already past when "
    "the bundle was applied, or the every-minute check of a reservation that did not fire).",
    ["via"],
    initial=[(via,) for via in VIA],
)


@dataclass(frozen=True)
class RevealResult:
    phase: Phase
    revealed_at: dt.datetime
    #: This call made the reveal (False: it had been made before, or by a concurrent call).
    revealed_now: bool

    @property
    def revealed(self) -> bool:
        return True


def reveal_moment(phase: Phase) -> dt.datetime | None:
    """When `phase`'s hidden splits are due to be revealed: its end (`reveal: end`), its
    `reveal_at` (`reveal: <time>`), or None (`reveal: never`, or an end-less phase)."""
    if phase.reveal == Reveal.END:
        return phase.end
    if phase.reveal == Reveal.TIME:
        return phase.reveal_at
    return None


def reveal_path(*, slug: str, phase_slug: str) -> str:
    """The path of POST .../reveal/ for the phase: what its reservation calls."""
    return reverse("challenge-phase-reveal", kwargs={"slug": slug, "phase": phase_slug})


def _phases_path(slug: str) -> str:
    return reverse("challenge-detail", kwargs={"slug": slug}) + "phases/"


def overdue_after() -> dt.timedelta:
    """How long after its time a hidden phase counts as overdue: the birth window a watcher
    still fires in (BIRTH_DELAY_LIMIT_TIME) and two minutes for the call's retries."""
    return dt.timedelta(minutes=float(settings.BIRTH_DELAY_LIMIT_TIME) + 2)


def phase_reveal(*, phase_id: str, via: str, now: dt.datetime | None = None) -> RevealResult:
    """Reveal the phase's hidden splits, exactly once: one conditional UPDATE
    (`revealed_at IS NULL` → `now`), so of any number of concurrent callers one wins; the
    others (and every later call) are no-ops that return the same `revealed_at`. The winner
    logs the reveal and counts it under `via`. NotFound when the phase does not exist."""
    now = now or timezone.now()
    won = Phase.objects.filter(pk=phase_id, revealed_at__isnull=True).update(revealed_at=now) == 1
    phase = Phase.objects.select_related("challenge").filter(pk=phase_id).first()
    if phase is None or phase.revealed_at is None:
        raise NotFound("No such phase.")
    if won:
        REVEALS.labels(via).inc()
        logger.info(
            "phase %s/%s revealed (%s) at %s",
            phase.challenge.slug,
            phase.slug,
            via,
            phase.revealed_at.isoformat(),
        )
    return RevealResult(phase=phase, revealed_at=phase.revealed_at, revealed_now=won)


def _phase_of(challenge: Challenge, phase_slug: str) -> Phase:
    phase = Phase.objects.filter(challenge=challenge, slug=phase_slug).first()
    if phase is None:
        raise NotFound("No such phase.")
    return phase


def phase_reveal_request(
    *, user: AbstractBaseUser, auth: Any, slug: str, phase_slug: str, now: dt.datetime | None = None
) -> RevealResult:
    """POST .../reveal/. A host or staff reveals now, whatever the phase's `reveal` (also
    `never`), and the phase's pending reservation is cancelled; asking again answers the same
    `revealed_at`. The phase's own reservation (the platform's signed call, `auth` its running
    plan) reveals once the phase's time has come (RevealNotDue, 409, before: a call left
    running by a bundle that moved the time). ChallengeNotFound (404) when the caller may not
    see the challenge, NotFound for an unknown phase, PermissionDenied (403) for anyone else."""
    now = now or timezone.now()
    path = reveal_path(slug=slug, phase_slug=phase_slug)
    if platform_call(user=user, auth=auth, path=path):
        challenge = challenge_get(slug=slug)
        if challenge is None:
            raise ChallengeNotFound()
        phase = _phase_of(challenge, phase_slug)
        moment = reveal_moment(phase)
        guard = dt.timedelta(seconds=float(settings.EXECUTION_GUARD_TIME))
        if phase.revealed_at is None and (moment is None or moment > now + guard):
            raise RevealNotDue()
        return phase_reveal(phase_id=phase.pk, via="schedule", now=now)
    challenge = challenge_get_visible(slug=slug, user=user)
    if not challenge_may_manage(challenge=challenge, user=user):
        raise PermissionDenied("Only the challenge's hosts (and staff) may reveal a phase.")
    result = phase_reveal(phase_id=_phase_of(challenge, phase_slug).pk, via="host", now=now)
    platform_reservation_set(path=path, at=None, now=now)
    return result


def challenge_reveals_sync(*, slug: str, now: dt.datetime | None = None) -> None:
    """Make the challenge's reveal reservations match its phases, after a bundle was applied:
    a hidden phase with a reveal time in the future has one reservation at that time (booked
    or moved); one whose time has passed is revealed now; a revealed phase, a `never` one and
    a removed one have none. Idempotent. Holds the challenge's row lock, so that concurrent
    applies' syncs run one after the other and the last reads the last bundle's times."""
    now = now or timezone.now()
    with transaction.atomic():
        challenge = challenge_get(slug=slug, for_update=True)
        phases = [] if challenge is None else list(Phase.objects.filter(challenge=challenge))
        wanted: dict[str, dt.datetime | None] = {}
        for phase in phases:
            moment = None if phase.revealed_at is not None else reveal_moment(phase)
            if moment is not None and moment <= now:
                phase_reveal(phase_id=phase.pk, via="overdue", now=now)
                moment = None
            wanted[reveal_path(slug=slug, phase_slug=phase.slug)] = moment
        for path in platform_reservations(prefix=_phases_path(slug)):
            wanted.setdefault(path, None)
        for path, moment in wanted.items():
            platform_reservation_set(path=path, at=moment, now=now)


def phases_reveal_overdue(*, now: dt.datetime | None = None) -> int:
    """Reveal every hidden phase more than `overdue_after()` past its time (its reservation
    did not make it); returns how many this call revealed. Idempotent."""
    now = now or timezone.now()
    cutoff = now - overdue_after()
    due = Phase.objects.filter(revealed_at__isnull=True).filter(
        Q(reveal=Reveal.END, end__lte=cutoff) | Q(reveal=Reveal.TIME, reveal_at__lte=cutoff)
    )
    revealed = 0
    for phase_id in list(due.values_list("pk", flat=True)):
        result = phase_reveal(phase_id=phase_id, via="overdue", now=now)
        if result.revealed_now:
            revealed += 1
            logger.warning(
                "phase %s/%s was revealed late by the overdue check: its reservation did "
                "not reveal it on time",
                result.phase.challenge.slug,
                result.phase.slug,
            )
    return revealed
