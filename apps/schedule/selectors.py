"""Reads of the schedule app."""

from __future__ import annotations

import datetime as dt

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Prefetch, QuerySet

from apps.core.selectors import heartbeats_named, owned_get, token_live
from apps.schedule.models import LIVING_STATES, Life, Plan, PlanAttempt, PlanKind, PlanState
from apps.schedule.task_runs import life_death_undoes_birth

#: Why a birth booked with an API token is refused once that token stops authenticating.
BOOKING_TOKEN_GONE = "the API token that booked this Life was revoked or has expired"  # noqa: S105


def plan_authority_live(*, plan: Plan, now: dt.datetime | None = None) -> bool:
    """Whether `plan` may still act as its Life's owner. A Life booked (or last changed) with an
    API token acts only while that token still authenticates (not revoked, not expired, its
    user active), whatever its target; a session's booking always. One death still runs after
    the token is gone: the one that undoes what its birth granted (`quota.restore` after
    `quota.boost`, paired at booking), so a grant made under a live token always ends."""
    life = plan.life
    if life.booking_token_id is None or token_live(token_id=life.booking_token_id, now=now):
        return True
    return plan.kind == PlanKind.DEATH and life_death_undoes_birth(
        birth_action=life.birth_action, death_action=life.death_action
    )


def life_list(
    *,
    user: AbstractBaseUser,
    state: str | None = None,
    resource_id: str | None = None,
    schedule_type: str | None = None,
) -> QuerySet[Life]:
    """The user's own Lives, filtered, with their plans prefetched."""
    lives = Life.objects.filter(owner_id=user.pk).select_related("owner")
    if state:
        lives = lives.filter(state=state)
    if resource_id:
        lives = lives.filter(resource_id=resource_id)
    if schedule_type:
        lives = lives.filter(schedule_type=schedule_type)
    return lives.prefetch_related(
        Prefetch("plans", queryset=Plan.objects.order_by("time", "pk")),
    ).order_by("birth_time", "pk")


def life_living_count(*, user_id: int) -> int:
    """How many of the user's Lives are not finished (not Dead, not Stillbirth)."""
    return Life.objects.filter(owner_id=user_id, state__in=LIVING_STATES).count()


def life_get(*, life_uuid: str, user: AbstractBaseUser | None, for_update: bool = False) -> Life:
    """One Life by uuid; NotFound, or PermissionDenied for another user's (never its data).

    `user=None` is an operator (admin): no ownership check. With `for_update` the row is
    locked until the transaction ends.
    """
    return owned_get(
        Life.objects.all(),
        lookup={"life_uuid": str(life_uuid).replace("-", "").lower()},
        user=user,
        label="Life",
        for_update=for_update,
    )


def life_detail(*, life_uuid: str, user: AbstractBaseUser) -> Life:
    """A Life with its plans and every attempt prefetched."""
    life = life_get(life_uuid=life_uuid, user=user)
    return (
        Life.objects.select_related("owner")
        .prefetch_related(
            Prefetch(
                "plans",
                queryset=Plan.objects.order_by("time", "pk").prefetch_related(
                    Prefetch("attempts", queryset=PlanAttempt.objects.order_by("number"))
                ),
            )
        )
        .get(pk=life.pk)
    )


# Heartbeats: `watcher` is the last tick of any watcher (what /healthz reads); each watcher
# also beats under `watcher:<host>:<pid>`.
WATCHER_HEARTBEAT = "watcher"
WATCHER_HEARTBEAT_PREFIX = "watcher:"


def watcher_heartbeats() -> list[tuple[str | None, dt.datetime]]:
    """(watcher name, last tick) per watcher, and (None, last tick of any watcher)."""
    return [
        (None if name == WATCHER_HEARTBEAT else name.removeprefix(WATCHER_HEARTBEAT_PREFIX), tick)
        for name, tick in heartbeats_named(name=WATCHER_HEARTBEAT, prefix=WATCHER_HEARTBEAT_PREFIX)
    ]


def plans_waiting_count(*, now: dt.datetime) -> int:
    """Plans armed and due that no worker has started: Preset with `due_at` <= now (served by
    the partial index `schedule_plan_pending_idx`)."""
    return Plan.objects.filter(state=PlanState.PRESET, due_at__lte=now).count()


def plan_lateness_since(*, since: dt.datetime) -> list[float]:
    """Lateness in seconds (start - due time) of the plans started since `since` (their last
    start), for the /ops/ page (index `schedule_plan_started_idx`)."""
    rows = Plan.objects.filter(started_at__gte=since).values_list("started_at", "due_at")
    return [
        max(0.0, (started - due).total_seconds())
        for started, due in rows
        if started is not None and due is not None
    ]
