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
# The team's counted entries in the phase, all of them and today's (one scan of the team's
# entries), and its grants, total and today's (one scan of its grants).
_USED = (
    "SELECT COUNT(*) AS total,"
    " COALESCE(SUM(CASE WHEN c.{e.counted_at} >= %s THEN 1 ELSE 0 END), 0) AS today"
    " FROM {e} c WHERE c.{e.phase} = %s AND c.{e.team} = %s AND c.{e.counted} = %s"
)
_GRANTED = (
    "SELECT COALESCE(SUM(CASE WHEN g.{g.limit} = %s THEN g.{g.extra} ELSE 0 END), 0) AS total,"
    " COALESCE(SUM(CASE WHEN g.{g.limit} = %s AND g.{g.day} = %s THEN g.{g.extra} ELSE 0 END),"
    " 0) AS today FROM {g} g WHERE g.{g.team} = %s AND g.{g.phase} = %s"
)
# Queued or running: only counted when the team's counted entries could reach the limit.
_ACTIVE_COUNT = (
    "SELECT COUNT(*) FROM {e} a WHERE a.{e.phase} = %s AND a.{e.team} = %s"  # noqa: S608
    f" AND a.{{e.counted}} = %s AND EXISTS (SELECT 1 FROM {{j}} j"
    f" WHERE j.{{j.submission}} = a.{{e.submission}} AND j.{{j.status}} IN ({_ACTIVE}))"
)


def _count_if_under_statement(*, total: bool, per_day: bool, concurrent: bool) -> SqlStatement:
    """The conditional UPDATE of `phase_limits_count_if_under` for a phase that sets the limits
    given (a limit it does not set is not checked). Parameters: see `_count_if_under_params`."""
    sql = (
        "UPDATE {e} SET {e.team} = %s, {e.counted} = %s, {e.counted_at} = %s,"
        " {e.refund_reason} = '' WHERE {e.submission} = %s"
        " AND EXISTS (SELECT 1 FROM {m} m WHERE m.{m.team} = %s AND m.{m.user} = %s)"
    )
    under = [
        *(["u.total < %s + g.total"] if total else []),
        *(["u.today < %s + g.today"] if per_day else []),
        *([f"(u.total < %s OR ({_ACTIVE_COUNT}) < %s)"] if concurrent else []),
    ]
    if under:
        sql += (
            f" AND EXISTS (SELECT 1 FROM ({_USED}) u, ({_GRANTED}) g"  # noqa: S608
            f" WHERE {' AND '.join(under)})"
        )
    return SqlStatement(sql, e=Entry, g=TeamGrant, m=TeamMember, j=Job)


# Raw SQL on purpose: compiling this UPDATE cost the ORM several times what PostgreSQL spends
# running it, on every phase job submission (docs/benchmarks.md). One statement per
# combination of the limits a phase sets.
_COUNT_IF_UNDER = {
    (total, per_day, concurrent): _count_if_under_statement(
        total=total, per_day=per_day, concurrent=concurrent
    )
    for total in (False, True)
    for per_day in (False, True)
    for concurrent in (False, True)
}


@dataclass(frozen=True)
class PhaseLimits:
    """What the phase's check at enqueue needs of a phase: its id and the limits it sets."""

    phase_id: str
    per_day: int | None
    total: int | None
    concurrent: int | None


def _count_if_under_params(
    *, entry_id: str, limits: PhaseLimits, team_id: str, user_id: int, now: dt.datetime
) -> list[object]:
    ops = connection.ops
    params: list[object] = [team_id, True, ops.adapt_datetimefield_value(now), entry_id]
    params += [team_id, user_id]
    if limits.total is None and limits.per_day is None and limits.concurrent is None:
        return params
    start = utc_day_start(now)
    params += [ops.adapt_datetimefield_value(start), limits.phase_id, team_id, True]
    params += [GrantLimit.TOTAL.value, GrantLimit.PER_DAY.value]
    params += [ops.adapt_datefield_value(start.date()), team_id, limits.phase_id]
    if limits.total is not None:
        params += [limits.total]
    if limits.per_day is not None:
        params += [limits.per_day]
    if limits.concurrent is not None:
        params += [limits.concurrent, limits.phase_id, team_id, True]
        params += [*(status.value for status in ACTIVE_JOB_STATUSES), limits.concurrent]
    return params


def phase_limits_count_if_under(
    *, entry_id: str, limits: PhaseLimits, team_id: str, user_id: int, now: dt.datetime
) -> bool:
    """One statement: count the entry `entry_id` for `team_id` if the user is still a member
    and the team is under every limit of the entry's phase (grants included), and say whether
    it was counted.

    The caller holds the team row's lock, taken in a statement of its own before this one, so
    the counts (read at this statement's start) include every entry counted before the lock
    was granted. False says nothing about why: `phase_limits_admit` then finds out (and makes
    the refusal) under the same lock."""
    statement = _COUNT_IF_UNDER[
        (limits.total is not None, limits.per_day is not None, limits.concurrent is not None)
    ]
    params = _count_if_under_params(
        entry_id=entry_id, limits=limits, team_id=team_id, user_id=user_id, now=now
    )
    return statement.rowcount(params) == 1
