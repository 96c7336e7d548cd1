"""A team's limits in a phase (SPEC §11.4): what it used, what it is allowed, and the check
at enqueue.

Every counted entry of the team in the phase counts towards `total`; those counted on the
current UTC calendar day towards `per_day` (it resets at 00:00 UTC); those whose job is
queued or running towards `concurrent`. A refunded entry (`counted=False`) counts nowhere.
`allowed` is the phase's limit plus the hosts' grants (a per_day grant for today only); a
limit the phase does not set is unlimited (`allowed` None).

`phase_limits_admit` runs inside the job's transaction (`phase_admission_check`): it locks
the team row FIRST, then counts; the jobs admission locks the user's quota row after it
returns. Lock order of an enqueue: submission row → team row → user's quota row.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Sum

from apps.benchmarks.metrics import phase_limit_refused
from apps.benchmarks.models import Entry, GrantLimit, Phase, Team, TeamGrant, TeamMember
from apps.benchmarks.team_exceptions import PhaseLimitExceeded
from apps.core.sql import SqlStatement
from apps.jobs.models import ACTIVE_JOB_STATUSES, Job

PER_DAY = "per_day"
TOTAL = "total"
CONCURRENT = "concurrent"
LIMITS = (PER_DAY, TOTAL, CONCURRENT)


@dataclass(frozen=True)
class LimitUse:
    allowed: int | None
    used: int
    resets_at: dt.datetime | None = None

    @property
    def remaining(self) -> int | None:
        return None if self.allowed is None else max(0, self.allowed - self.used)


def utc_day_start(now: dt.datetime) -> dt.datetime:
    day = now.astimezone(dt.UTC).date()
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


def _granted(*, team_id: str, phase: Phase, limit: str, day: dt.date | None) -> int:
    grants = TeamGrant.objects.filter(team_id=team_id, phase=phase, limit=limit)
    if day is not None:
        grants = grants.filter(day=day)
    return int(grants.aggregate(n=Sum("extra"))["n"] or 0)


def phase_limits_usage(*, team_id: str, phase: Phase, now: dt.datetime) -> dict[str, LimitUse]:
    """The team's use of each limit of the phase at `now` (three counts, two sums)."""
    start = utc_day_start(now)
    counted = Entry.objects.filter(phase=phase, team_id=team_id, counted=True)
    per_day = phase.limit_per_day
    total = phase.limit_total
    if per_day is not None:
        today = start.date()
        per_day += _granted(team_id=team_id, phase=phase, limit=GrantLimit.PER_DAY, day=today)
    if total is not None:
        total += _granted(team_id=team_id, phase=phase, limit=GrantLimit.TOTAL, day=None)
    return {
        PER_DAY: LimitUse(
            allowed=per_day,
            used=counted.filter(counted_at__gte=start).count(),
            resets_at=start + dt.timedelta(days=1),
        ),
        TOTAL: LimitUse(allowed=total, used=counted.count()),
        CONCURRENT: LimitUse(
            allowed=phase.limit_concurrent,
            # No ordering: Entry's default one would join the phase and the challenge and sort
            # every counted entry of the team, since DISTINCT keeps the ordering's columns.
            used=counted.filter(submission__jobs__status__in=ACTIVE_JOB_STATUSES)
            .order_by()
            .values("pk")
            .distinct()
            .count(),
        ),
    }


def _refusal(limit: str, use: LimitUse, now: dt.datetime) -> PhaseLimitExceeded:
    extra: dict[str, object] = {"limit": limit, "used": use.used, "allowed": use.allowed}
    headers: dict[str, str] = {}
    if limit == PER_DAY and use.resets_at is not None:
        extra["resets_at"] = use.resets_at.isoformat()
        retry = max(1, math.ceil((use.resets_at - now).total_seconds()))
        extra["retry_after"] = retry
        headers["Retry-After"] = str(retry)
    words = {
        PER_DAY: "submissions today (UTC)",
        TOTAL: "submissions in this phase",
        CONCURRENT: "submissions queued or running",
    }
    return PhaseLimitExceeded(
        f"Phase limit reached: your team has {use.used} of {use.allowed} {words[limit]}.",
        extra=extra,
        headers=headers,
    )


def phase_limits_admit(*, entry: Entry, team: Team, now: dt.datetime) -> None:
    """Count `entry` for `team` (whose row the caller has locked) if the team is under every
    limit of the entry's phase, else PhaseLimitExceeded. Checked in the order total, per_day,
    concurrent: the most lasting refusal is the one reported. Writes only the entry."""
    usage = phase_limits_usage(team_id=team.pk, phase=entry.phase, now=now)
    for limit in (TOTAL, PER_DAY, CONCURRENT):
        use = usage[limit]
        if use.allowed is not None and use.used >= use.allowed:
            phase_limit_refused(limit=limit)
            raise _refusal(limit, use, now)
    Entry.objects.filter(pk=entry.pk).update(
        team=team, counted=True, counted_at=now, refund_reason=""
    )


_ACTIVE = ", ".join("%s" for _ in ACTIVE_JOB_STATUSES)
# `{e}` unaliased is the entry being counted (the UPDATE's row): its phase `p`, its team's
# counted entries in the phase, all of them and today's (one scan of the team's entries), and
# the team's grants in the phase, total and today's (one scan of its grants).
_USED = (
    "SELECT COUNT(*) AS total,"
    " COALESCE(SUM(CASE WHEN c.{e.counted_at} >= %s THEN 1 ELSE 0 END), 0) AS today"
    " FROM {e} c WHERE c.{e.phase} = {e}.{e.phase} AND c.{e.team} = {e}.{e.team}"
    " AND c.{e.counted} = %s"
)
_GRANTED = (
    "SELECT COALESCE(SUM(CASE WHEN g.{g.limit} = %s THEN g.{g.extra} ELSE 0 END), 0) AS total,"
    " COALESCE(SUM(CASE WHEN g.{g.limit} = %s AND g.{g.day} = %s THEN g.{g.extra} ELSE 0 END),"
    " 0) AS today FROM {g} g WHERE g.{g.team} = {e}.{e.team} AND g.{g.phase} = {e}.{e.phase}"
)
# Queued or running: only counted when the team's counted entries could reach the limit (an
# OR whose first arm holds skips it: fewer counted entries than the limit, fewer active ones).
_ACTIVE_COUNT = (
    "SELECT COUNT(*) FROM {e} a WHERE a.{e.phase} = {e}.{e.phase}"  # noqa: S608
    f" AND a.{{e.team}} = {{e}}.{{e.team}} AND a.{{e.counted}} = %s AND EXISTS (SELECT 1"
    f" FROM {{j}} j WHERE j.{{j.submission}} = a.{{e.submission}}"
    f" AND j.{{j.status}} IN ({_ACTIVE}))"
)
# Count the entry if its submitter is still a member of its team, its phase is open and the
# team is under every limit the phase sets (a limit it does not set, NULL, is not checked),
# the phase's window and limits read in the statement itself: no round trip to read them.
_COUNT_IF_UNDER = SqlStatement(
    "UPDATE {e} SET {e.counted} = %s, {e.counted_at} = %s, {e.refund_reason} = ''"  # noqa: S608
    " WHERE {e.submission} = %s"
    " AND EXISTS (SELECT 1 FROM {m} m WHERE m.{m.team} = {e}.{e.team} AND m.{m.user} = %s)"
    " AND EXISTS (SELECT 1 FROM {p} p WHERE p.{p.id} = {e}.{e.phase}"
    " AND p.{p.start} <= %s AND (p.{p.end} IS NULL OR %s < p.{p.end})"
    " AND ((p.{p.limit_total} IS NULL AND p.{p.limit_per_day} IS NULL"
    " AND p.{p.limit_concurrent} IS NULL)"
    f" OR EXISTS (SELECT 1 FROM ({_USED}) u, ({_GRANTED}) g"
    " WHERE (p.{p.limit_total} IS NULL OR u.total < p.{p.limit_total} + g.total)"
    " AND (p.{p.limit_per_day} IS NULL OR u.today < p.{p.limit_per_day} + g.today)"
    " AND (p.{p.limit_concurrent} IS NULL OR u.total < p.{p.limit_concurrent}"
    f" OR ({_ACTIVE_COUNT}) < p.{{p.limit_concurrent}}))))",
    e=Entry,
    g=TeamGrant,
    m=TeamMember,
    p=Phase,
    j=Job,
)
# The lock of the entry's team row (PostgreSQL): taken before the count, in a statement of its
# own, so the count (read at the UPDATE's start) includes every entry counted before the lock
# was granted. On SQLite the job's IMMEDIATE transaction already serializes every writer.
_TEAM_LOCK = SqlStatement(
    "SELECT t.{t.id} FROM {t} t JOIN {e} e ON e.{e.team} = t.{t.id}"
    " WHERE e.{e.submission} = %s FOR UPDATE OF t",
    e=Entry,
    t=Team,
)


def _count_if_under_params(*, entry_id: str, user_id: int, now: dt.datetime) -> list[Any]:
    ops = connection.ops
    at = ops.adapt_datetimefield_value(now)
    start = utc_day_start(now)
    return [
        True,
        at,
        entry_id,
        user_id,
        at,
        at,
        ops.adapt_datetimefield_value(start),
        True,
        GrantLimit.TOTAL.value,
        GrantLimit.PER_DAY.value,
        ops.adapt_datefield_value(start.date()),
        True,
        *(status.value for status in ACTIVE_JOB_STATUSES),
    ]


def phase_entry_count_if_under(*, entry_id: str, user_id: int, now: dt.datetime) -> bool:
    """Lock the team row of the entry `entry_id`, then count the entry if its phase is open at
    `now`, the user is still a member of its team and the team is under every limit of the
    phase (grants included); say whether it was counted.

    PostgreSQL: the lock and the conditional UPDATE are two statements sent in one round trip
    (one query string: each statement takes its own snapshot, the UPDATE's after the lock is
    granted); with server-side binding (`DATABASE_PREPARE_THRESHOLD`), which takes one
    statement per query, two round trips. SQLite: the UPDATE alone. False says nothing about
    why: the caller finds out (and refuses, or counts the entry for another team) under the
    lock, which it then holds."""
    params = _count_if_under_params(entry_id=entry_id, user_id=user_id, now=now)
    update = _COUNT_IF_UNDER.render()
    if not connection.features.has_select_for_update:
        return _COUNT_IF_UNDER.rowcount(params) == 1
    lock = _TEAM_LOCK.render()
    with connection.cursor() as cursor:
        if connection.settings_dict["OPTIONS"].get("server_side_binding") is True:
            cursor.execute(lock, [entry_id])
            cursor.execute(update, params)
            return int(cursor.rowcount) == 1
        cursor.execute(f"{lock}; {update}", [entry_id, *params])
        cursor.nextset()
        return int(cursor.rowcount) == 1
