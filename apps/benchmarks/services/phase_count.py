"""The phase's check at enqueue in one round trip (SPEC §11.4): lock the entry's team row, then
count the entry if its phase is open, its submitter is still in its team and the team is under
every limit of the phase (grants included). `phase_limits.phase_limits_admit` is the general
path (and makes the refusals) when this does not count the entry.

On PostgreSQL both statements run inside one function, `benchmarks_entry_count_if_under`
(migration 0006): one round trip, and PL/pgSQL keeps the statements' plans for the session, so
they are not planned again on every submission (planning cost PostgreSQL more than running
them; server-side prepared statements would too, but they are off by default, since a
transaction-pooling PgBouncer breaks them, and a function's plans are not affected). The
function is VOLATILE: each statement in it takes its own snapshot, so the count (read at the
UPDATE's start) includes every entry counted before the lock was granted. Its body is the two
statements below with numbered parameters (`count_function_body`); a test compares it with
the function in the database, so a change here needs a migration that replaces the function.
SQLite runs the UPDATE alone: the job's IMMEDIATE transaction already serializes every writer.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import connection

from apps.benchmarks.models import Entry, GrantLimit, Phase, Team, TeamGrant, TeamMember
from apps.benchmarks.services.phase_limits import utc_day_start
from apps.core.plpgsql import parameters
from apps.core.sql import SqlStatement
from apps.jobs.models import ACTIVE_JOB_STATUSES, Job

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
# The lock of the entry's team row (PostgreSQL), taken before the count in a statement of its
# own. Parameter: the entry's id.
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


COUNT_FUNCTION = "benchmarks_entry_count_if_under"
# The function's parameters, in the order of `_COUNT_IF_UNDER`'s (see `_count_if_under_params`).
COUNT_FUNCTION_ARGS = (
    "boolean",
    "timestamp with time zone",
    "character varying",
    "integer",
    "timestamp with time zone",
    "timestamp with time zone",
    "timestamp with time zone",
    "boolean",
    "character varying",
    "character varying",
    "date",
    "boolean",
    *("character varying" for _ in ACTIVE_JOB_STATUSES),
)
_ENTRY_ARG = 3
_CALL = "SELECT {}({})".format(
    COUNT_FUNCTION, ", ".join(f"%s::{kind}" for kind in COUNT_FUNCTION_ARGS)
)


def count_function_body(using: str = "default") -> str:
    """The body of `COUNT_FUNCTION` (PostgreSQL): lock, count, whether the entry was counted."""
    lock = _TEAM_LOCK.render(using)
    update = _COUNT_IF_UNDER.render(using)
    if not lock.startswith("SELECT "):
        raise ValueError(lock)
    lock = "PERFORM " + lock.removeprefix("SELECT ")
    return (
        "\nBEGIN\n"
        f"  {parameters(lock, [_ENTRY_ARG])};\n"
        f"  {parameters(update, list(range(1, len(COUNT_FUNCTION_ARGS) + 1)))};\n"
        "  RETURN FOUND;\n"
        "END\n"
    )


def count_function_sql(using: str = "default") -> str:
    """CREATE OR REPLACE of `COUNT_FUNCTION` as this module defines it (what migration 0006
    ran, written out there)."""
    return (
        f"CREATE OR REPLACE FUNCTION {COUNT_FUNCTION}({', '.join(COUNT_FUNCTION_ARGS)})"
        f" RETURNS boolean LANGUAGE plpgsql VOLATILE AS $body${count_function_body(using)}$body$"
    )


def phase_entry_count_if_under(*, entry_id: str, user_id: int, now: dt.datetime) -> bool:
    """Lock the team row of the entry `entry_id` (PostgreSQL), then count the entry if its
    phase is open at `now`, the user is still a member of its team and the team is under
    every limit of the phase (grants included); say whether it was counted. One statement:
    the function on PostgreSQL, the UPDATE on SQLite. False says nothing about why: the
    caller finds out (and refuses, or counts the entry for another team) under the lock,
    which it then holds."""
    params = _count_if_under_params(entry_id=entry_id, user_id=user_id, now=now)
    if connection.vendor != "postgresql":
        return _COUNT_IF_UNDER.rowcount(params) == 1
    with connection.cursor() as cursor:
        cursor.execute(_CALL, params)
        row = cursor.fetchone()
    return bool(row[0])
