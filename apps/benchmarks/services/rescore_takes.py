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
  the rescore is not live or no item is free.
- `item_settle`: the lease's conditional outcome UPDATE, inside the caller's outcome
  transaction, which it makes commit asynchronously.

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
from dataclasses import dataclass

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
from apps.core.sql import SqlStatement
from apps.grading.leases import grading_lease_seconds

_PENDING, _PROCESSING = RescoreItemStatus.PENDING.value, RescoreItemStatus.PROCESSING.value
_FAILED = RescoreItemStatus.FAILED.value
WORKER_LOST = "worker_lost"
TAG_LENGTH = 8  # a lease token's first characters: its worker process's tag
_tags: dict[int, str] = {}  # by process id: a forked worker gets a tag of its own
logger = logging.getLogger(__name__)

# Parameters: failed, worker lost, now, rescore, processing, now, max attempts, processing,
# now, max attempts (the spent leases fail, as in the generic path), rescore, processing,
# now, max attempts, rescore, pending, rescore, 2 live
# states, processing, token, expires, pending, processing, now, max attempts. The lease's
# UPDATE finds the picked item by its primary key alone (the pick is of the rescore's items
# already): a second condition on the rescore let the planner walk every item of the
# rescore instead while the table's statistics were those of before the rescore's INSERT.
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
    " SELECT taken.item, set_config('synchronous_commit', 'off', true), "
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


class Renewer(threading.Thread):
    """Renews the item's lease every third of its length while its scorer runs."""

    def __init__(self, item_id: int, token: str) -> None:
        super().__init__(name=f"rescore-{item_id}", daemon=True)
        self.item_id, self.token = item_id, token
        self.stopped = threading.Event()

    def run(self) -> None:
        seconds = grading_lease_seconds()
        try:
            while not self.stopped.wait(max(0.5, seconds / 3)):
                expires = timezone.now() + dt.timedelta(seconds=seconds)
                if not RescoreItem.objects.filter(
                    pk=self.item_id,
                    status=RescoreItemStatus.PROCESSING,
                    lease_token=self.token,
                ).update(lease_expires_at=expires):
                    return
        except Exception:
            logger.exception("rescore: cannot renew the lease of item %s", self.item_id)
        finally:
            connections.close_all()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=30)


def fast() -> bool:
    """Whether the database runs these statements (PostgreSQL)."""
    return connection.vendor == "postgresql"


def item_take(*, rescore_id: int, max_attempts: int) -> Take | None:
    """Lease the first free item of the live rescore and read it (see the module docstring);
    None when this statement leased nothing (always on other databases)."""
    if not fast():
        return None
    now, token = timezone.now(), lease_token()
    expires = now + dt.timedelta(seconds=grading_lease_seconds())
    live = [state.value for state in LIVE]
    rows = _TAKE.fetchall(
        [
            *(_FAILED, WORKER_LOST, now, rescore_id, _PROCESSING, now, max_attempts),
            *(_PROCESSING, now, max_attempts),
            *(rescore_id, _PROCESSING, now, max_attempts),
            *(rescore_id, _PENDING, rescore_id, *live),
            *(_PROCESSING, token, expires),
            *(_PENDING, _PROCESSING, now, max_attempts),
        ]
    )
    if not rows:
        return None
    item_id = int(rows[0][0])
    entry = entry_item_from_rows(item_id=item_id, rows=[row[2:] for row in rows])
    return Take(item_id=item_id, token=token, entry=entry)


def item_settle(
    *, item_id: int, token: str, status: str, failure: str, logs: str, finished: dt.datetime
) -> bool:
    """Write the outcome if the lease is still `token`'s (in the caller's transaction,
    committed asynchronously); whether it was."""
    row = _SETTLE.fetchone([status, failure, logs, finished, item_id, _PROCESSING, token])
    return row is not None
