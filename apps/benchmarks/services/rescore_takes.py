"""A rescore item's lease: its token, its renewal, and its take and outcome in fewer round
trips on PostgreSQL (SPEC §11.6).

The generic path (`rescoring`) reads up to 8 candidates, leases one by a compare-and-set
UPDATE, reads the item, and later settles it: four statements and two synchronous commits
around every item. On PostgreSQL the take runs as one statement:

- `item_take`: one statement picks the first item with an expired lease (whose attempts are
  left) or else the first pending one, each `FOR UPDATE SKIP LOCKED` (two chains never pick
  the same row; the UPDATE repeats the conditions, so a row changed meanwhile is left
  alone), leases it, and reads an entry's item with its rescore, entry, submission, phase,
  challenge and files (`rescore_entries._LOAD`'s columns). The same statement fails up to
  8 items whose lease expired with their attempts spent (`worker_lost`). It returns None
  when it leased nothing: the caller then takes the generic path, which finds nothing when
  the rescore is not live or no item is free. The statement runs inside a PL/pgSQL
  function, `TAKE_FUNCTION` (migration benchmarks.0008): its plan is kept for the session
  instead of being parsed and planned for every item (`apps.core.plpgsql`).
- `item_settle`: the lease's conditional outcome UPDATE, inside the caller's outcome
  transaction, which it makes commit asynchronously (a baseline's item; an entry's whole
  record is one function call, `rescore_records`).

The lease and the outcome commit asynchronously (`set_config('synchronous_commit', 'off',
true)`: for their own transaction only). A server crash may lose the last of them; a lost
lease or outcome leaves the item as it was (`pending`, or `processing` under a lease that
expires), so it is taken and scored again, and the scores' unique constraint
(entry|baseline, version, split) keeps a second recording from writing twice. The switch's
commit stays synchronous, and flushing it flushes every earlier commit with it (the
write-ahead log is written in order), so a switched leaderboard never lacks an outcome it
counted (docs/decisions.md)."""

from __future__ import annotations

import datetime as dt
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.db import connection, connections
from django.utils import timezone

from apps.benchmarks.models import (
    RescoreItem,
    RescoreItemStatus,
)
from apps.benchmarks.services.rescore_entries import (
    ENTRY_ITEM_COLUMNS,
    ENTRY_ITEM_TABLES,
    EntryItem,
    entry_item_from_rows,
)
from apps.benchmarks.services.rescores import LIVE
from apps.core.plpgsql import PlpgsqlFunction, parameters
from apps.core.sql import SqlStatement
from apps.grading.leases import grading_lease_seconds
from apps.jobs.selectors import JOBS_QUEUED

_PENDING, _PROCESSING = RescoreItemStatus.PENDING.value, RescoreItemStatus.PROCESSING.value
_FAILED = RescoreItemStatus.FAILED.value
WORKER_LOST = "worker_lost"
JOB_WAITING = "job_waiting"  # the take leased nothing: a job is queued for a worker
TAG_LENGTH = 8  # a lease token's first characters: its worker process's tag
_tags: dict[int, str] = {}  # by process id: a forked worker gets a tag of its own
logger = logging.getLogger(__name__)

# Its placeholders are the take function's arguments (`_TAKE_PLACES`): failed, worker lost,
# now, rescore, processing, now, max attempts, processing, now, max attempts (the spent leases
# fail, as in the generic path), rescore, processing, now, max attempts, rescore, pending,
# rescore, 2 live states, processing, token, expires, pending, processing, now, max attempts.
# The lease's UPDATE finds the picked item by its primary key alone (the pick is of the
# rescore's items already): a second condition on the rescore let the planner walk every item
# of the rescore instead while the table's statistics were those of before the rescore's
# INSERT.
# Each pick walks the index (rescore, status, id) and stops at its first free row.
_TAKE = SqlStatement(
    "WITH spent AS (UPDATE {i} SET {i.status} = %s, {i.failure} = %s,"  # noqa: S608
    " {i.logs} = 'The worker was lost ' || CAST({i.attempts} AS text) || ' times while scoring.',"
    " {i.lease_expires_at} = NULL, {i.finished_at} = %s"
    " WHERE {i.id} IN (SELECT {i.id} FROM {i} WHERE {i.rescore} = %s AND {i.status} = %s"
    " AND {i.lease_expires_at} < %s AND {i.attempts} >= %s"
    " ORDER BY {i.id} LIMIT 8 FOR UPDATE SKIP LOCKED)"
    " AND {i.status} = %s AND {i.lease_expires_at} < %s AND {i.attempts} >= %s),"
    " pick AS (SELECT COALESCE("
    "(SELECT {i.id} FROM {i} WHERE {i.rescore} = %s AND {i.status} = %s"
    " AND {i.lease_expires_at} < %s AND {i.attempts} < %s"
    " ORDER BY {i.id} LIMIT 1 FOR UPDATE SKIP LOCKED),"
    " (SELECT {i.id} FROM {i} WHERE {i.rescore} = %s AND {i.status} = %s"
    " ORDER BY {i.id} LIMIT 1 FOR UPDATE SKIP LOCKED)) AS item"
    " FROM {r} WHERE {r.id} = %s AND {r.state} IN (%s, %s)),"
    " taken AS (UPDATE {i} SET {i.status} = %s, {i.lease_token} = %s,"
    " {i.lease_expires_at} = %s, {i.attempts} = {i.attempts} + 1"
    " WHERE {i.id} = (SELECT item FROM pick) AND ({i.status} = %s"
    " OR ({i.status} = %s AND {i.lease_expires_at} < %s AND {i.attempts} < %s))"
    " RETURNING {i.id} AS item, {i.entry} AS entry, {i.rescore} AS rescore)"
    " SELECT taken.item, "
    + ENTRY_ITEM_COLUMNS
    + " FROM taken JOIN {r} ON {r}.{r.id} = taken.rescore"
    " LEFT JOIN {e} ON {e}.{e.submission} = taken.entry"
    " LEFT JOIN {u} ON {u}.{u.id} = {e}.{e.submission}"
    " LEFT JOIN {p} ON {p}.{p.id} = {e}.{e.phase}"
    " LEFT JOIN {c} ON {c}.{c.id} = {p}.{p.challenge}"
    " LEFT JOIN {f} ON {f}.{f.submission} = {u}.{u.id}"
    " ORDER BY {f}.{f.uploaded_at}, {f}.{f.id}",
    **ENTRY_ITEM_TABLES,
)
# The take's function (migration benchmarks.0008): its arguments (failed, worker lost, now,
# rescore, processing, max attempts, pending, 2 live states, token, expires, whether a queued
# job comes first), and which of them each of `_TAKE`'s placeholders is.
_TAKE_ARGUMENTS = (
    *("character varying", "character varying", "timestamp with time zone", "bigint"),
    *("character varying", "integer", "character varying", "character varying"),
    *("character varying", "character varying", "timestamp with time zone", "boolean"),
)
_TAKE_PLACES = (1, 2, 3, 4, 5, 3, 6, 5, 3, 6, 4, 5, 3, 6, 4, 7, 4, 8, 9, 5, 10, 11, 7, 5, 3, 6)
_TAKE_RETURNS = (
    "TABLE(item bigint, version integer, entry character varying, team character varying,"
    " submitted_at timestamp with time zone, kept_predictions character varying,"
    " phase character varying, kind character varying, final_selection integer,"
    " bundle_file character varying, bundle_sha256 character varying,"
    " filename character varying, storage_name character varying)"
)


def _take_body(using: str) -> str:
    """The take as one statement; an item leased commits asynchronously (module docstring).
    Its columns are the statement's: table columns win over the result's names. With its
    last argument set, a queued job comes first: one row of NULLs, nothing leased."""
    return (
        "\n#variable_conflict use_column\nBEGIN\n"
        f"  IF $12 AND EXISTS ({JOBS_QUEUED.render(using)}) THEN\n"
        "    RETURN NEXT;\n"
        "    RETURN;\n"
        "  END IF;\n"
        f"  RETURN QUERY {parameters(_TAKE.render(using), _TAKE_PLACES)};\n"
        "  IF FOUND THEN\n"
        "    PERFORM set_config('synchronous_commit', 'off', true);\n"
        "  END IF;\n"
        "END\n"
    )


TAKE_FUNCTION = PlpgsqlFunction(
    name="benchmarks_rescore_item_take",
    arguments=_TAKE_ARGUMENTS,
    returns=_TAKE_RETURNS,
    body=_take_body,
)
# Parameters: status, failure, logs, finished, item, processing, token. One row when the
# lease was still the caller's.
_SETTLE = SqlStatement(
    "WITH settled AS (UPDATE {i} SET {i.status} = %s, {i.failure} = %s, {i.logs} = %s,"
    " {i.lease_expires_at} = NULL, {i.finished_at} = %s"
    " WHERE {i.id} = %s AND {i.status} = %s AND {i.lease_token} = %s RETURNING {i.id})"
    " SELECT set_config('synchronous_commit', 'off', true) FROM settled",
    i=RescoreItem,
)


@dataclass(frozen=True)
class Take:
    """An item leased by `item_take`; `entry` is None for a baseline's item."""

    item_id: int
    token: str
    entry: EntryItem | None


def lease_token() -> str:
    """A new lease token: the worker process's tag, then 24 random hex digits. A chain's
    leases share its worker's tag, so `_chains_enough` counts chains, not leases."""
    pid = os.getpid()
    tag = _tags.get(pid)
    if tag is None:
        tag = _tags.setdefault(pid, secrets.token_hex(TAG_LENGTH // 2))
    return tag + secrets.token_hex(12)


class Renewer:
    """Renews the lease of the item its chain is scoring, every third of the lease's length,
    on one thread per chain (started with the chain's first item), instead of a thread per
    item: `watch` before the scorer runs, `unwatch` after, `close` when the chain ends. A
    renewal runs under the renewer's lock, so once `unwatch` returns the lease is no longer
    renewed (an item given back or scored lets its lease expire). A lease that is no longer
    the chain's (its UPDATE changes nothing) or a failed renewal stops that lease's renewals."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._lease: tuple[int, str] | None = None
        self._due = 0.0
        self._closed = False
        self._thread: threading.Thread | None = None

    @staticmethod
    def _period() -> float:
        return max(0.5, grading_lease_seconds() / 3)

    def watch(self, item_id: int, token: str) -> None:
        with self._changed:
            self._lease = (item_id, token)
            self._due = time.monotonic() + self._period()
            self._changed.notify()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="rescore-renew", daemon=True)
            self._thread.start()

    def unwatch(self) -> None:
        with self._changed:
            self._lease = None
            self._changed.notify()

    def close(self) -> None:
        with self._changed:
            self._closed, self._lease = True, None
            self._changed.notify()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        try:
            with self._changed:
                while not self._closed:
                    left = self._due - time.monotonic()
                    if self._lease is None or left > 0:
                        self._changed.wait(None if self._lease is None else left)
                        continue
                    item_id, token = self._lease
                    self._due = time.monotonic() + self._period()
                    if not self._renewed(item_id, token):
                        self._lease = None
        finally:
            connections.close_all()

    def _renewed(self, item_id: int, token: str) -> bool:
        expires = timezone.now() + dt.timedelta(seconds=grading_lease_seconds())
        try:
            return bool(
                RescoreItem.objects.filter(
                    pk=item_id, status=RescoreItemStatus.PROCESSING, lease_token=token
                ).update(lease_expires_at=expires)
            )
        except Exception:
            logger.exception("rescore: cannot renew the lease of item %s", item_id)
            return False


def fast() -> bool:
    """Whether the database runs these statements (PostgreSQL)."""
    return connection.vendor == "postgresql"


def item_take(*, rescore_id: int, max_attempts: int, yield_to_jobs: bool) -> Take | str | None:
    """Lease the first free item of the live rescore and read it (see the module docstring);
    None when this statement leased nothing (always on other databases). `yield_to_jobs`:
    `JOB_WAITING`, nothing leased, when a job is queued for a worker (`jobs_waiting`, asked in
    the same round trip)."""
    if not fast():
        return None
    now, token = timezone.now(), lease_token()
    expires = now + dt.timedelta(seconds=grading_lease_seconds())
    live = [state.value for state in LIVE]
    arguments: list[Any] = [_FAILED, WORKER_LOST, now, rescore_id, _PROCESSING, max_attempts]
    arguments += [_PENDING, *live, token, expires, yield_to_jobs]
    with connection.cursor() as cursor:
        cursor.execute(TAKE_FUNCTION.call_sql(), arguments)
        rows = cursor.fetchall()
    if not rows:
        return None
    if rows[0][0] is None:
        return JOB_WAITING
    item_id = int(rows[0][0])
    entry = entry_item_from_rows(item_id=item_id, rows=[row[1:] for row in rows])
    return Take(item_id=item_id, token=token, entry=entry)


def item_settle(
    *, item_id: int, token: str, status: str, failure: str, logs: str, finished: dt.datetime
) -> bool:
    """Write the outcome if the lease is still `token`'s (in the caller's transaction,
    committed asynchronously); whether it was."""
    row = _SETTLE.fetchone([status, failure, logs, finished, item_id, _PROCESSING, token])
    return row is not None
