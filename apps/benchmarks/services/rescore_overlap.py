"""A chain's item recorded while the chain already scores its next one (SPEC §11.6).

Recording an item's outcome is waiting: for the database's answers and its commit. A chain
that waited for it before taking its next item left its worker's sandbox idle for that long
(docs/benchmarks.md, "Rescoring"). A `Recorder` runs each record on a thread of its own,
with a database connection of its own, while the chain's worker takes and scores the next
item; it records one item at a time, in order, and the chain waits for the previous record
before handing it the next. So a chain never runs more than one sandbox at a time and holds
at most two leases: the item being recorded and the one being scored.

Nothing else changes: the record is the same transaction under the same lease. A worker that
dies with a record not written leaves that item `processing`; its lease expires and the item
is taken and scored again, and the scores' unique constraint keeps the second record from
writing twice. (On PostgreSQL an entry's record is one function call: one the worker had sent
whole before it died is finished by the server, as a COMMIT it had sent would be.)
A chain that ends (its batch, nothing left, a stopping worker) waits for its
last record first, so the switch that follows sees it. Inside a transaction held by the
caller (tests), or with `RESCORE_OVERLAP` off, the records run in the chain's thread.

In a cluster's worker the record thread and its database connection outlive the chain's task:
the worker's next chain task records on them. A chain task lasts `RESCORE_BATCH` items, and a
connection opened per task cost the server a new backend (its start, its catalog caches, the
record function compiled and its statements planned again) and the worker a connect, every 20
items (docs/benchmarks.md, "Rescoring on PostgreSQL: the record thread kept"). The connection
is checked at each chain's first record (`CONN_MAX_AGE`, errors: `_recorded`), as a request's
start checks the web's, so it is replaced when Django would replace any other. Elsewhere (the
test suite, `sync`) each chain closes its thread and connection when it ends, as before.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from django.conf import settings
from django.db import connection, connections

from apps.core.cluster import in_cluster

logger = logging.getLogger(__name__)
# A cluster worker's record thread, kept from one chain task to the next: (process id, pool).
_kept: tuple[int, ThreadPoolExecutor] | None = None


def _recorded(record: Callable[[], str], check: bool) -> str:
    """Run `record` on the thread's connection; `check` (a chain's first record) replaces the
    connection first if it is too old (`CONN_MAX_AGE`) or broken, as a request's start does.
    Not before every record: each check makes the next query run a health check (`SELECT 1`,
    `CONN_HEALTH_CHECKS`), a round trip per item. A record that fails raises in its chain,
    which then ends; the next chain's first record checks the connection."""
    if check:
        connection.close_if_unusable_or_obsolete()
    return record()


def _closed() -> None:
    connections.close_all()


def _kept_pool() -> ThreadPoolExecutor:
    """This worker process's record thread (made on first use; a forked process makes its
    own: a thread does not survive a fork)."""
    global _kept
    pid = os.getpid()
    if _kept is None or _kept[0] != pid:
        _kept = (pid, ThreadPoolExecutor(max_workers=1, thread_name_prefix="rescore-record"))
    return _kept[1]


def kept_close() -> None:
    """Close this process's kept record thread and its connection, if there is one (a test
    that ran chains as a cluster worker would)."""
    global _kept
    kept, _kept = _kept, None
    if kept is not None and kept[0] == os.getpid():
        kept[1].submit(_closed).result()
        kept[1].shutdown(wait=True)


class Recorder:
    """Records a chain's items one after another, off the chain's own thread."""

    def __init__(self) -> None:
        # A thread would not see rows of a transaction the caller holds.
        self._inline = connection.in_atomic_block or not settings.RESCORE_OVERLAP
        # In a cluster's worker the thread and its connection serve the next chain too.
        self._kept = not self._inline and in_cluster()
        self._pool: ThreadPoolExecutor | None = None
        if self._kept:
            self._pool = _kept_pool()
        elif not self._inline:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rescore-record")
        self._pending: Future[str] | None = None
        self._used = False
        self._outcome: str | None = None

    def submit(self, record: Callable[[], str]) -> str | None:
        """Wait for the previous record, then start `record`; the previous outcome (None for
        the first). A record's exception is raised here or by `wait`."""
        previous = self.wait()
        if self._pool is None:
            self._outcome = record()
        else:
            self._pending = self._pool.submit(_recorded, record, not self._used)
            self._used = True
        return previous

    def wait(self) -> str | None:
        """Wait for the record in flight; its outcome (None when there was none)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._outcome = pending.result()
        outcome, self._outcome = self._outcome, None
        return outcome

    def close(self) -> None:
        """Wait for the record in flight (its exception is logged, not raised: the caller
        is already ending), then close the thread's connection and the thread (a cluster
        worker's are kept for its next chain)."""
        if self._pool is None:
            return
        try:
            if self._pending is not None:
                self._pending.result()
        except Exception:
            logger.exception("rescore: an item's record failed")
        finally:
            self._pending = None
            if not self._kept:
                if self._used:  # the thread exists and may hold a connection
                    self._pool.submit(_closed).result()
                self._pool.shutdown(wait=True)
