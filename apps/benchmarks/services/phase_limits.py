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

from django.db.models import Sum

from apps.benchmarks.metrics import phase_limit_refused
from apps.benchmarks.models import Entry, GrantLimit, Phase, Team, TeamGrant
from apps.benchmarks.team_exceptions import PhaseLimitExceeded
from apps.jobs.models import ACTIVE_JOB_STATUSES

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
