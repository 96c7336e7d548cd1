"""Locked read-modify-write of one row loses no update and never sees 'database is locked'."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection

from apps.core.selectors import heartbeat_get
from apps.core.services import heartbeat_beat
from tests.concurrency import run_concurrently


def test_sqlite_is_opened_with_immediate_transactions_and_a_busy_timeout() -> None:
    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.sqlite3":
        pytest.skip("SQLite only")
    assert db["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert db["OPTIONS"]["timeout"] >= 5


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
