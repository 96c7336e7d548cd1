"""SQLite transactions begin IMMEDIATE (the write lock is taken at BEGIN), and a locked
read-modify-write of one row loses no update and never sees 'database is locked'."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from django.db import OperationalError, connection, connections, transaction

from apps.core.selectors import heartbeat_get
from apps.core.services import heartbeat_beat
from tests.concurrency import run_concurrently


def _holding_the_first_transaction(hold: Callable[[], object]) -> threading.Thread:
    """A thread that opens a transaction which writes nothing, calls `hold` inside it, then
    commits: under IMMEDIATE it has the write lock from its BEGIN on."""
    began = threading.Event()

    def first() -> None:
        try:
            with transaction.atomic():
                began.set()
                hold()
        finally:
            began.set()
            connections.close_all()

    thread = threading.Thread(target=first, daemon=True)
    thread.start()
    assert began.wait(30), "the first transaction never began"
    return thread


@pytest.mark.django_db(transaction=True)
def test_a_second_transaction_is_refused_at_begin_while_the_first_has_written_nothing() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only: PostgreSQL serializes writers with row locks")
    release = threading.Event()
    first = _holding_the_first_transaction(lambda: release.wait(30))
    entered: list[bool] = []
    try:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA busy_timeout = 50")  # fail fast instead of queueing
        with pytest.raises(OperationalError, match="database is locked"):  # noqa: SIM117
            with transaction.atomic():
                entered.append(True)  # a DEFERRED BEGIN gets here: it takes no lock
    finally:
        release.set()
        first.join(30)
        connection.close()  # drop the shortened busy timeout

    assert entered == [], "refused at BEGIN, before the block's first statement"


@pytest.mark.django_db(transaction=True)
def test_a_second_transaction_waits_at_begin_until_the_first_commits() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only: PostgreSQL serializes writers with row locks")
    second_begins = threading.Event()
    first_done = threading.Event()

    def hold() -> None:
        second_begins.wait(30)
        time.sleep(0.3)  # long enough for the second BEGIN to be waiting on the lock
        first_done.set()

    first = _holding_the_first_transaction(hold)
    try:
        second_begins.set()
        with transaction.atomic():
            saw_first_done = first_done.is_set()
    finally:
        first.join(30)

    assert saw_first_done, "the second BEGIN returned while the first still held the lock"


@pytest.mark.django_db(transaction=True)
def test_two_threads_incrementing_one_row_lose_no_update() -> None:
    per_thread = 100

    def tick(_: int) -> int:
        for _ in range(per_thread):
            heartbeat_beat(name="race")
        return per_thread

    outcomes = run_concurrently(tick, 2)

    assert [o.error for o in outcomes] == [None, None]
    beat = heartbeat_get(name="race")
    assert beat is not None
    assert beat.beats == 2 * per_thread
    assert connection.vendor in {"sqlite", "postgresql"}


@pytest.mark.django_db(transaction=True)
def test_eight_threads_creating_the_same_row_make_one() -> None:
    outcomes = run_concurrently(lambda _: heartbeat_beat(name="fresh").pk, 8)
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    assert len({o.value for o in outcomes}) == 1
    beat = heartbeat_get(name="fresh")
    assert beat is not None
    assert beat.beats == 8
