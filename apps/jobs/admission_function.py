"""A plain job admission in one round trip on PostgreSQL (`apps.jobs.admission.job_admit`).

One PL/pgSQL function, `jobs_admit_plain` (migration jobs.0004), runs what the job's
transaction does after the seal when the job has no reservation and no exemption: lock the
user's quota policy row; count the usage (`QUOTA_USAGE_SQL`, a statement of its own: the
function is VOLATILE, so in READ COMMITTED it takes its own snapshot after the lock is granted
and sees every job the lock's previous holder committed); insert the job only if it is under
the rate, cost and concurrent limits; then bind the idempotency key (`_BIND`'s compare-and-set)
and insert the task's queue row (`apps.core.queue.QUEUE_ROW_INSERT`), each only when given.
It answers the policy's limit columns, the usage, whether it inserted and whether it bound:
the caller computes the limits again from the policy (`quota_limits`) for the refusals and
warnings. The limits the function decides with are the same expressions over the policy and
the settings' defaults (`tests/jobs/test_admission_function.py` compares them). No row at all:
the user has no policy row yet (the general path creates it).

One round trip instead of two (the lock, then the counted insert), and PL/pgSQL keeps the
statements' plans for the session, so PostgreSQL does not plan them on every submission (as
`benchmarks_entry_count_if_under`; server-side prepared statements stay off by default).
The body is rendered from models and fields; a test compares it with the migration's text
and with the function in the database, so a change here needs a migration.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from typing import Any

from django.conf import settings
from django.db import connection

from apps.core.plpgsql import PlpgsqlFunction, parameters
from apps.core.queue import QUEUE_ROW_INSERT, QueueRow, queue_row_model
from apps.core.sql import ModelInsert, SqlStatement
from apps.jobs.models import ACTIVE_JOB_STATUSES, IdempotencyKey, Job
from apps.jobs.selectors import QUOTA_USAGE_SQL, ROLLING_WINDOW, QuotaUsage
from apps.quotas.models import QuotaPolicy, Reservation
from apps.quotas.selectors import month_start

ADMIT_FUNCTION = "jobs_admit_plain"

_JOB_FIELDS = Job._meta.concrete_fields
_SCALARS = (
    ("user", "integer"),
    ("default_concurrent", "integer"),
    ("max_boost", "integer"),
    ("default_per_day", "integer"),
    ("default_cost", "double precision"),
    *((f"status_{n}", "character varying") for n in range(len(ACTIVE_JOB_STATUSES))),
    ("since", "timestamp with time zone"),
    ("month_start", "timestamp with time zone"),
    ("now", "timestamp with time zone"),
)
_TAIL = (
    ("key_id", "bigint"),
    ("key_token", "character varying"),
    ("key_expires", "timestamp with time zone"),
    ("queue_key", "character varying"),
    ("queue_payload", "text"),
    ("queue_lock", "timestamp with time zone"),
)


def _sql_type(field: Any) -> str:
    """The argument type of a field's column: its type without a length."""
    kind = re.sub(r"\(.*\)", "", str(field.db_type(connection)))
    return "character varying" if kind == "varchar" else kind


def _arguments() -> list[tuple[str, str]]:
    """(name, type) of every argument, in order: `_SCALARS`, the job's fields, `_TAIL`."""
    fields = [(f"job_{f.name}", _sql_type(f)) for f in _JOB_FIELDS]
    return [*_SCALARS, *fields, *_TAIL]


def _index(name: str) -> int:
    """n of the argument `name` (`$n`)."""
    return [a for a, _ in _arguments()].index(name) + 1


def _n(name: str) -> str:
    """`$n` of the argument `name`."""
    return f"${_index(name)}"


def _numbered(sql: str, names: list[str]) -> str:
    """`sql` with its `%s` placeholders, in order, as the arguments `names`."""
    return parameters(sql, [_index(name) for name in names])


_OUT = (
    "o_max_concurrent integer, o_per_day integer, o_cost_limit double precision,"
    " o_storage bigint, o_boost integer, o_active bigint, o_last_day bigint,"
    " o_month_cost double precision, o_reserved bigint, o_inserted boolean, o_bound boolean"
)


def _body_template() -> str:
    statuses = [f"status_{n}" for n in range(len(ACTIVE_JOB_STATUSES))]
    usage = _numbered(
        QUOTA_USAGE_SQL,
        ["user", *statuses, "user", "since", "user", "month_start", "user", "now"],
    )
    columns = ", ".join(f"{{j.{f.name}}}" for f in _JOB_FIELDS)
    values = ", ".join(_n(f"job_{f.name}") for f in _JOB_FIELDS)
    queue = _numbered(QUEUE_ROW_INSERT, ["queue_key", "queue_payload", "queue_lock"])
    return (
        "\nDECLARE\n"  # noqa: S608 - names from _meta, values are arguments
        "  v_concurrent integer; v_per_day integer; v_cost double precision; v_storage bigint;"
        " v_boost integer;\n"
        "  v_active bigint; v_last_day bigint; v_month_cost double precision;"
        " v_reserved bigint;\n"
        "  v_base integer; v_limit integer; v_inserted boolean := false;"
        " v_bound boolean := false;\n"
        "BEGIN\n"
        "  SELECT {p.max_concurrent_jobs}, {p.max_jobs_per_day}, {p.monthly_cost_limit},"
        " {p.max_storage_bytes}, {p.concurrent_boost}"
        " INTO v_concurrent, v_per_day, v_cost, v_storage, v_boost"
        f" FROM {{p}} WHERE {{p.user}} = {_n('user')} FOR UPDATE;\n"
        "  IF NOT FOUND THEN\n    RETURN;\n  END IF;\n"
        f"  {usage} INTO v_active, v_last_day, v_month_cost, v_reserved;\n"
        f"  v_base := COALESCE(v_concurrent, {_n('default_concurrent')});\n"
        "  v_limit := CASE WHEN v_base <= 0 THEN 0"
        f" ELSE v_base + LEAST(GREATEST(0, v_boost), {_n('max_boost')}) END;\n"
        f"  IF v_last_day < COALESCE(v_per_day, {_n('default_per_day')})"
        " AND v_active + v_reserved < v_limit"
        f" AND (COALESCE(v_cost, {_n('default_cost')}) IS NULL"
        f" OR v_month_cost + {_n('job_cost')} <= COALESCE(v_cost, {_n('default_cost')})) THEN\n"
        f"    INSERT INTO {{j}} ({columns}) VALUES ({values});\n"
        "    v_inserted := true;\n"
        f"    IF {_n('key_id')} IS NOT NULL THEN\n"
        f"      UPDATE {{k}} SET {{k.job}} = {_n('job_id')}, {{k.lock_token}} = '',"
        f" {{k.locked_at}} = NULL, {{k.expires_at}} = {_n('key_expires')}"
        f" WHERE {{k.id}} = {_n('key_id')} AND {{k.lock_token}} = {_n('key_token')}"
        " AND {k.job} IS NULL;\n"
        "      v_bound := FOUND;\n"
        "    END IF;\n"
        f"    IF {_n('queue_key')} IS NOT NULL THEN\n"
        f"      {queue};\n"
        "    END IF;\n"
        "  END IF;\n"
        "  RETURN QUERY SELECT v_concurrent, v_per_day, v_cost, v_storage, v_boost, v_active,"
        " v_last_day, v_month_cost, v_reserved, v_inserted, v_bound;\n"
        "END\n"
    )


_BODY: SqlStatement | None = None


def admit_function_body(using: str = "default") -> str:
    """The body of `ADMIT_FUNCTION` (PostgreSQL)."""
    global _BODY
    if _BODY is None:
        _BODY = SqlStatement(
            _body_template(),
            p=QuotaPolicy,
            j=Job,
            r=Reservation,
            k=IdempotencyKey,
            q=queue_row_model(),
        )
    return _BODY.render(using)


@functools.cache
def admit_function() -> PlpgsqlFunction:
    """`ADMIT_FUNCTION` as this module defines it (migration jobs.0004 ran its `create_sql`,
    written out there)."""
    return PlpgsqlFunction(
        name=ADMIT_FUNCTION,
        arguments=tuple(kind for _, kind in _arguments()),
        returns=f"TABLE ({_OUT})",
        body=admit_function_body,
    )


def admit_function_arguments() -> str:
    """The function's argument types, as `pg_get_function_identity_arguments` lists them."""
    return ", ".join(admit_function().arguments)


def admit_function_sql(using: str = "default") -> str:
    """CREATE OR REPLACE of `ADMIT_FUNCTION` as this module defines it."""
    return admit_function().create_sql(using)


_JOB_INSERT = ModelInsert(Job)


def _call() -> str:
    return admit_function().call_sql()


def admit_plain(
    job: Job,
    *,
    now: dt.datetime,
    key: tuple[Any, ...] | None,
    queued: QueueRow | None,
) -> tuple[QuotaPolicy, QuotaUsage, bool, bool | None] | None:
    """Run `ADMIT_FUNCTION` for the new `job` (its fields set, its primary key too) at `now`,
    with the key's bind (`key`: its id, token and new expiry; None: no key) and the task's
    queue row (`queued`). The user's policy (its limit columns), the usage before this job,
    whether the job was inserted, whether the key was bound (None without a key); None when
    the user has no policy row (nothing was done)."""
    ops = connection.ops
    cost_default = settings.QUOTA_MONTHLY_COST_LIMIT
    params = [
        job.owner_id,
        int(settings.QUOTA_MAX_CONCURRENT_JOBS),
        int(settings.QUOTA_MAX_BOOST),
        int(settings.QUOTA_MAX_JOBS_PER_DAY),
        None if cost_default is None else float(cost_default),
        *(status.value for status in ACTIVE_JOB_STATUSES),
        ops.adapt_datetimefield_value(now - ROLLING_WINDOW),
        ops.adapt_datetimefield_value(month_start(now)),
        ops.adapt_datetimefield_value(now),
        *_JOB_INSERT.params(job),
        *((None, None, None) if key is None else key),
        *((None, None, None) if queued is None else queued.params),
    ]
    with connection.cursor() as cursor:
        cursor.execute(_call(), params)
        row = cursor.fetchone()
    if row is None:
        return None
    policy = QuotaPolicy(
        user_id=job.owner_id,
        max_concurrent_jobs=row[0],
        max_jobs_per_day=row[1],
        monthly_cost_limit=row[2],
        max_storage_bytes=row[3],
        concurrent_boost=row[4],
    )
    usage = QuotaUsage(
        active_jobs=int(row[5]),
        active_reservations=int(row[8]),
        jobs_last_24h=int(row[6]),
        cost_this_month=float(row[7] or 0),
    )
    inserted = bool(row[9])
    if inserted:
        _JOB_INSERT.inserted(job)
    return policy, usage, inserted, None if key is None else bool(row[10])
