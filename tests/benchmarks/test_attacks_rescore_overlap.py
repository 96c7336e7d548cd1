"""Attacks on a chain that records an item on a thread of its own while it scores the next one
(`rescore_overlap`), and on the one-statement take with asynchronous commits
(`rescore_takes`), SPEC §11.6. Each attack is played with real threads, real sandboxes and
the real database (SQLite and PostgreSQL):

- an item's lease expires while its record is still to run, or while the record holds the
  item and waits for a lock, and another chain takes the item;
- the record fails with a database error while the chain has scored its next item;
- a host cancels the rescore between an item's score and its record;
- a lease token of another process, or one that shares the worker's tag, settles, renews or
  gives back the item;
- the take's asynchronous commit setting reaches a later transaction of the connection (the
  switch's commit must stay synchronous).

Each ends with every (submission, version) scored exactly once, the leaderboard on one
version that never went backwards, and nothing counted or used changed. (A worker killed
with SIGKILL between an item's score and its record: `test_rescore_overlap`.)"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import DatabaseError, connection, connections
from django.utils import timezone
from rest_framework.test import APIClient

from apps.benchmarks.models import Entry, Phase, Rescore, RescoreItem, Score
from apps.benchmarks.services import rescore_takes
from apps.benchmarks.services.rescore_overlap import Recorder
from apps.benchmarks.services.rescoring import _give_back, _item_score, _Scored, rescore_next
from tests.benchmarks.rescoring import HALVING_SCORER, new_scorer, rescore_all
from tests.benchmarks.scoring import (
    apply_bundle,
    graded,
    host_user,
    phase_of,
    phase_submission,
    predictions_csv,
)
from tests.benchmarks.test_rescore_overlap import RecordBlocker
from tests.factories.users import make_user
from tests.grading.conftest import sandbox_settings  # noqa: F401 - the fixture
from tests.processes import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("sandbox_settings")]

BASE = "/api/challenges/digits/phases/dev/"


def _setup(entries: int) -> tuple[User, Rescore, list[Entry], list[User]]:
    """`entries` graded, counted submissions of as many teams in version 1, then version 2."""
    host = host_user()
    dev = phase_of(apply_bundle(host), "dev")
    users = [make_user(username=f"a{i}") for i in range(entries)]
    made = []
    for i, user in enumerate(users):
        files = {"predictions.csv": predictions_csv(wrong=tuple(str(k) for k in range(1, i + 1)))}
        made.append(graded(*phase_submission(user, dev, files))[2])
    Entry.objects.update(counted=True)
    new_scorer(host)
    return host, Rescore.objects.get(phase=dev, version=2), made, users


def _scored(rescore: Rescore) -> _Scored:
    """The rescore's next item taken and scored by this thread's chain, not yet recorded."""
    scored = _item_score(rescore_id=rescore.pk, renewer=None, yield_to_jobs=False)
    assert isinstance(scored, _Scored), scored
    return scored


def _expire(item_id: int) -> None:
    """The item's lease runs out (as it does once a lease's length passed unrenewed)."""
    past = timezone.now() - dt.timedelta(seconds=1)
    RescoreItem.objects.filter(pk=item_id).update(lease_expires_at=past)


def _scored_once(rescore: Rescore, entries: list[Entry]) -> None:
    """Every entry has one score per split in version 2, every item is done, the board
    switched."""
    for entry in entries:
        assert Score.objects.filter(entry=entry, version=2).count() == 2
    assert set(rescore.items.values_list("status", flat=True)) == {"done"}
    assert Phase.objects.get(pk=rescore.phase_id).scoring_version == 2


def _in_thread(target: Any) -> tuple[threading.Thread, list[Any]]:
    found: list[Any] = []

    def run() -> None:
        try:
            found.append(target())
        except BaseException as exc:
            found.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, found


def _lock_waits() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return int(cursor.fetchone()[0])


def test_a_lease_expired_before_its_record_ran_is_taken_and_the_late_record_writes_nothing() -> (
    None
):
    _host, rescore, entries, _users = _setup(2)
    scored = _scored(rescore)  # chain A: scored, its record not started (the chain waits)
    _expire(scored.taken.item_id)

    thread, found = _in_thread(lambda: rescore_all(rescore.pk))  # chain B takes the item
    thread.join(60)
    assert found, "the chain did not end"
    assert not isinstance(found[0], BaseException), found
    assert Phase.objects.get(pk=rescore.phase_id).scoring_version == 2
    board = APIClient().get(BASE + "leaderboard/").json()

    recorder = Recorder()  # chain A's record, on its own thread, at last
    try:
        recorder.submit(scored.record)
        assert recorder.wait() == "lease_lost"
    finally:
        recorder.close()
    assert RescoreItem.objects.get(pk=scored.taken.item_id).attempts == 2
    _scored_once(rescore, entries)
    assert APIClient().get(BASE + "leaderboard/").json() == board


def test_a_lease_expiring_while_its_record_waits_for_a_lock_is_never_scored_twice() -> None:
    _host, rescore, entries, _users = _setup(1)  # one entry, then the baseline
    scored = _scored(rescore)
    _expire(scored.taken.item_id)
    blocker = RecordBlocker()
    blocker.start()
    assert blocker.holding.wait(10)
    recorder = Recorder()
    try:
        # PostgreSQL: the record holds the item's row and waits for the team's lock;
        # SQLite: it waits for the write lock. Chain B then wants the expired item.
        recorder.submit(scored.record)
        if connection.vendor == "postgresql":
            wait_for(lambda: _lock_waits() >= 1, 10, "the record to wait for the team's lock")
        thread, found = _in_thread(lambda: rescore_all(rescore.pk))
        if connection.vendor == "postgresql":
            wait_for(lambda: _lock_waits() >= 2, 30, "chain B to wait for the item's row")
        blocker.release.set()
        blocker.join(10)
        outcome = recorder.wait()
    finally:
        blocker.release.set()
        recorder.close()
    thread.join(60)
    assert found, "the chain did not end"
    assert not isinstance(found[0], BaseException), found
    attempts = RescoreItem.objects.get(pk=scored.taken.item_id).attempts
    if connection.vendor == "postgresql":
        assert (outcome, attempts) == ("done", 1)  # chain B never took it
    else:  # whoever got the write lock first: the other one wrote nothing
        assert (outcome, attempts) in {("done", 1), ("lease_lost", 2)}
    if Phase.objects.get(pk=rescore.phase_id).scoring_version == 1:
        rescore_all(rescore.pk)  # chain B ended before A's record: the switch is next chain's
    _scored_once(rescore, entries)


@pytest.fixture
def failing_scores() -> Iterator[None]:
    """The database refuses every entry's score in version 2 (a full disk, say) until the
    test ends or drops the trigger (`_drop_trigger`)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE FUNCTION att_refuse() RETURNS trigger AS $$ BEGIN"
                " RAISE EXCEPTION 'could not extend file: No space left on device';"
                " END $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                f"CREATE TRIGGER att_refuse BEFORE INSERT ON {Score._meta.db_table}"
                " FOR EACH ROW WHEN (NEW.entry_id IS NOT NULL AND NEW.version = 2)"
                " EXECUTE FUNCTION att_refuse()"
            )
        else:
            cursor.execute(
                f"CREATE TRIGGER att_refuse BEFORE INSERT ON {Score._meta.db_table}"
                " WHEN NEW.entry_id IS NOT NULL AND NEW.version = 2 BEGIN"
                " SELECT RAISE(ABORT, 'database or disk is full'); END"
            )
    yield
    _drop_trigger()


def _drop_trigger() -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"DROP TRIGGER IF EXISTS att_refuse ON {Score._meta.db_table}")
            cursor.execute("DROP FUNCTION IF EXISTS att_refuse()")
        else:
            cursor.execute("DROP TRIGGER IF EXISTS att_refuse")


@pytest.mark.usefixtures("failing_scores")
def test_a_record_failing_while_the_next_item_is_scored_loses_no_outcome_and_switches_nothing(
    client_for: Any,
) -> None:
    _host, rescore, entries, users = _setup(3)
    me_before = client_for(users[0]).get(BASE + "me/").json()["limits"]
    items = list(rescore.items.order_by("pk"))

    # The first item's record fails on its thread; the chain has scored the second meanwhile
    # and learns of the failure when it hands that one over.
    with pytest.raises(DatabaseError):
        rescore_next(rescore_id=rescore.pk)
    statuses = dict(rescore.items.values_list("pk", "status"))
    assert statuses[items[0].pk] == "processing"  # its outcome rolled back with the scores
    assert statuses[items[1].pk] == "processing"  # scored, never recorded
    assert not Score.objects.filter(version=2, entry__isnull=False).exists()
    assert Phase.objects.get(pk=rescore.phase_id).scoring_version == 1
    assert Rescore.objects.get(pk=rescore.pk).state == "running"

    _drop_trigger()  # the disk has room again; the two leases run out
    for item in items[:2]:
        _expire(item.pk)
    rescore_all(rescore.pk)
    _scored_once(rescore, entries)
    assert [i.attempts for i in rescore.items.order_by("pk")][:3] == [2, 2, 1]
    assert client_for(users[0]).get(BASE + "me/").json()["limits"] == me_before
    assert all(e.counted for e in Entry.objects.all())


def test_a_cancel_between_score_and_record_keeps_version_1_serving(client_for: Any) -> None:
    host, rescore, _entries, users = _setup(2)
    participant = client_for(users[0])
    board_before = APIClient().get(BASE + "leaderboard/").json()
    me_before = participant.get(BASE + "me/").json()
    scored = _scored(rescore)

    cancel = client_for(host).post(BASE + "rescore/cancel/")
    assert cancel.status_code == HTTPStatus.OK, cancel.content
    recorder = Recorder()
    try:
        recorder.submit(scored.record)
        recorder.wait()  # the item's work is kept for the hosts; nothing is served from it
    finally:
        recorder.close()
    assert rescore_next(rescore_id=rescore.pk) == "idle"  # a cancelled rescore takes nothing
    assert rescore_all(rescore.pk) == ["idle"]

    assert Phase.objects.get(pk=rescore.phase_id).scoring_version == 1
    assert Rescore.objects.get(pk=rescore.pk).state == "cancelled"
    assert APIClient().get(BASE + "leaderboard/").json() == board_before
    assert participant.get(BASE + "me/").json() == me_before
    newer = participant.get(BASE + "leaderboard/", {"scoring_version": 2})
    assert newer.status_code == HTTPStatus.BAD_REQUEST
    assert client_for(host).post(BASE + "rescore/retry/").json()["scoring_version"] == 1
    assert rescore_all(rescore.pk) == ["idle"]
    assert Phase.objects.get(pk=rescore.phase_id).scoring_version == 1


def _child_tag() -> str:
    """The lease token tag of a process forked from this one."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no database, no clean-up of the parent's state
        os.write(write, rescore_takes.lease_token()[: rescore_takes.TAG_LENGTH].encode())
        os._exit(0)
    os.close(write)
    tag = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(pid, 0)
    return tag


def test_no_token_but_the_leases_own_settles_renews_or_gives_back_the_item(
    settings: Any,
) -> None:
    _host, rescore, entries, _users = _setup(1)
    scored = _scored(rescore)
    token = scored.taken.token
    tag = token[: rescore_takes.TAG_LENGTH]
    other = _child_tag()
    assert other != tag
    assert len(other) == rescore_takes.TAG_LENGTH
    forged = [
        tag + "0" * (len(token) - len(tag)),  # this worker's tag, another lease
        other + token[len(tag) :],  # another process's tag, this lease's rest
        token[:-1],
        token.upper(),
        "",
    ]
    item = RescoreItem.objects.get(pk=scored.taken.item_id)
    settings.GRADING_TIMEOUT = 1  # a renewal after 0.67 s
    for bad in forged:
        taken = replace(scored.taken, token=bad)
        assert replace(scored, taken=taken).record() == "lease_lost"
        _give_back(taken)
        renewer = rescore_takes.Renewer()
        renewer.watch(taken.item_id, bad)
        deadline = time.monotonic() + 10
        while renewer._lease is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert renewer._lease is None  # it dropped the lease by itself: not its own
        renewer.close()
        now = RescoreItem.objects.get(pk=item.pk)
        assert (now.status, now.lease_token, now.lease_expires_at, now.attempts) == (
            "processing",
            token,
            item.lease_expires_at,
            1,
        )
    assert not Score.objects.filter(version=2, entry__isnull=False).exists()
    assert scored.record() == "done"
    rescore_all(rescore.pk)
    _scored_once(rescore, entries)


def _synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('synchronous_commit')")
        return str(cursor.fetchone()[0])


def test_the_asynchronous_commit_ends_with_the_take_and_the_record() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the take and the record commit asynchronously on PostgreSQL only")
    _host, rescore, entries, _users = _setup(1)
    assert _synchronous_commit() == "on"  # the server's: the switch's commit is durable
    scored = _scored(rescore)  # the one-statement take set it off for its own transaction
    assert _synchronous_commit() == "on"
    assert scored.record() == "done"  # the same for the record, in this thread
    assert _synchronous_commit() == "on"
    rescore_all(rescore.pk)  # the switch's transaction on the same connection
    assert _synchronous_commit() == "on"
    _scored_once(rescore, entries)


@pytest.mark.parametrize("end", ["cancelled", "superseded"])
def test_a_version_that_never_served_is_no_participants_board(client_for: Any, end: str) -> None:
    host, rescore, _entries, users = _setup(2)
    scored = _scored(rescore)
    assert scored.record() == "done"  # one submission of two has a version 2 score
    if end == "cancelled":
        assert client_for(host).post(BASE + "rescore/cancel/").status_code == HTTPStatus.OK
    new_scorer(host, body=HALVING_SCORER.format(sleep="") + "\n# version 3\n")
    rescore_all(Rescore.objects.get(phase_id=rescore.phase_id, version=3).pk)
    assert Phase.objects.get(pk=rescore.phase_id).scoring_version == 3
    assert Rescore.objects.get(pk=rescore.pk).state == end

    for caller in (client_for(users[0]), client_for(users[1]), APIClient()):
        for version, status in (
            (1, HTTPStatus.OK),
            (2, HTTPStatus.BAD_REQUEST),
            (3, HTTPStatus.OK),
        ):
            query: dict[str, str | int] = {"scoring_version": version}
            answer = caller.get(BASE + "leaderboard/", query)
            assert answer.status_code == status, (version, answer.content)
            csv = caller.get(BASE + "leaderboard/", {**query, "format": "csv"})
            assert csv.status_code == answer.status_code
    partial = client_for(host).get(BASE + "leaderboard/", {"scoring_version": 2}).json()
    assert len([row for row in partial["rows"] if not row["baseline"]]) == 1  # hosts: as it is
