"""Attacks on a cluster worker's record thread and connection kept from one chain task to the
next (`rescore_overlap`), played with real chains, sandboxes and the real database: the kept
connection killed between chains (`pg_terminate_backend`), every backend of the database
killed (what a PostgreSQL restart is to a worker), a record that raises, the kept thread busy
with another chain's record when a chain task arrives, a forked worker (whose inherited thread
is gone), and the chains of two rescores (two phases) run on one worker in turn.

Each ends with every (submission, version) scored exactly once, every item done, and each
phase's board switched to version 2 whole (never a mix of versions)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import DatabaseError, close_old_connections, connection, connections

from apps.benchmarks.models import Entry, Phase, Rescore, RescoreItem, Score
from apps.benchmarks.services import rescore_overlap
from apps.benchmarks.services.rescore_overlap import kept_close
from apps.benchmarks.services.rescoring import rescore_next
from apps.core import cluster
from tests.benchmarks.rescoring import new_scorer
from tests.benchmarks.scoring import (
    apply_bundle,
    graded,
    host_user,
    perfect_program,
    phase_of,
    phase_submission,
    predictions_csv,
)
from tests.benchmarks.test_attacks_rescore_overlap import (
    _drop_trigger,
    _expire,
    _setup,
    failing_scores,  # noqa: F401
)
from tests.factories.users import make_user
from tests.grading.conftest import sandbox_settings  # noqa: F401 - the fixture

PERFECT = {"predictions.csv": predictions_csv()}
ONE_WRONG = {"predictions.csv": predictions_csv(wrong=("1",))}
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("sandbox_settings")]


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Iterator[None]:
    """This process as a cluster worker whose chain tasks score one item each, so that
    every item is a chain task of its own on the kept thread."""
    monkeypatch.setattr(cluster, "_in_cluster", True)
    settings.RESCORE_BATCH = 1
    try:
        yield
    finally:
        kept_close()


def _on_kept(work: Any) -> Any:
    """`work()` run on this worker's kept record thread (with that thread's connection)."""
    return rescore_overlap._kept_pool().submit(work).result(timeout=30)


def _kept_backend() -> int:
    def pid() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return int(cursor.fetchone()[0])

    return int(_on_kept(pid))


def _terminate(where: str) -> int:
    """`pg_terminate_backend` on the backends `where` selects; how many it ended."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"  # noqa: S608
            " WHERE datname = current_database() AND " + where
        )
        return int(cursor.fetchone()[0])


def _tasks(rescore_id: int, *, limit: int = 60) -> list[str]:
    """Chain tasks run one after another as a worker runs them: Django's connections
    checked before each (as django-q2 does), until the rescore has nothing to take."""
    outcomes: list[str] = []
    for _ in range(limit):
        close_old_connections()
        outcomes.append(rescore_next(rescore_id=rescore_id))
        if outcomes[-1] in ("idle", "enough"):
            return outcomes
    raise AssertionError(f"the rescore did not finish: {outcomes}")


def _whole(rescore: Rescore, entries: list[Entry]) -> None:
    for entry in entries:
        assert Score.objects.filter(entry=entry, version=2).count() == 2
    assert set(rescore.items.values_list("status", flat=True)) == {"done"}
    assert Phase.objects.get(pk=rescore.phase_id).scoring_version == 2


def _served_whole(phase_id: Any) -> None:
    """The version a phase serves has a score for every counted entry (never a board that
    mixes a version's scores with another's)."""
    phase = Phase.objects.get(pk=phase_id)
    counted = Entry.objects.filter(phase=phase, counted=True)
    scored = counted.filter(scores__version=phase.scoring_version).distinct()
    assert scored.count() == counted.count(), phase.scoring_version


@pytest.mark.usefixtures("worker")
def test_the_kept_connection_killed_between_chains_is_replaced_at_the_next_chain() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("pg_terminate_backend is PostgreSQL's")
    _host, rescore, entries, _users = _setup(3)
    assert rescore_next(rescore_id=rescore.pk) == "done"  # one item, on the kept thread
    before = _kept_backend()
    assert _terminate(f"pid = {before}") == 1
    assert _tasks(rescore.pk)[-1] == "idle"
    assert _kept_backend() != before
    _whole(rescore, entries)
    assert all(item.attempts == 1 for item in rescore.items.all())  # nothing taken twice


@pytest.mark.usefixtures("worker")
def test_every_backend_killed_between_chains_as_a_restart_would_loses_nothing() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("pg_terminate_backend is PostgreSQL's")
    _host, rescore, entries, _users = _setup(3)
    assert rescore_next(rescore_id=rescore.pk) == "done"
    _kept_backend()  # the kept thread holds a connection
    # Every backend of this database but the one that asks (the kept thread's among them);
    # then the asking one too, from a connection of its own (its next query finds it gone).
    assert _terminate("pid <> pg_backend_pid()") >= 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        mine = int(cursor.fetchone()[0])
    other = threading.Thread(target=lambda: _terminate_from_elsewhere(mine))
    other.start()
    other.join(30)
    assert _tasks(rescore.pk)[-1] == "idle"
    _whole(rescore, entries)
    assert all(item.attempts == 1 for item in rescore.items.all())


def _terminate_from_elsewhere(pid: int) -> None:
    try:
        assert _terminate(f"pid = {pid}") == 1
    finally:
        connection.close()


@pytest.mark.usefixtures("worker", "failing_scores")
def test_a_record_that_raises_ends_its_chain_and_the_next_chain_records_on_the_kept_thread() -> (
    None
):
    _host, rescore, entries, _users = _setup(3)
    thread_before = _on_kept(threading.current_thread)
    with pytest.raises(DatabaseError):
        rescore_next(rescore_id=rescore.pk)  # one item: its record fails at the chain's end
    assert Phase.objects.get(pk=rescore.phase_id).scoring_version == 1
    processing = list(rescore.items.filter(status="processing").values_list("pk", flat=True))
    assert len(processing) == 1  # scored, its record rolled back: still leased

    _drop_trigger()
    for pk in processing:
        _expire(pk)  # its lease runs out; the next chain takes it again
    assert _tasks(rescore.pk)[-1] == "idle"
    assert _on_kept(threading.current_thread) is thread_before  # the same kept thread
    _whole(rescore, entries)
    assert RescoreItem.objects.get(pk=processing[0]).attempts == 2


@pytest.mark.usefixtures("worker")
def test_a_chain_arriving_while_the_kept_thread_is_busy_waits_and_loses_nothing() -> None:
    _host, rescore, entries, _users = _setup(2)
    busy = threading.Event()
    release = threading.Event()

    def hold() -> None:  # another chain's record still running (a lock wait, a slow commit)
        busy.set()
        release.wait(30)

    held = rescore_overlap._kept_pool().submit(hold)
    assert busy.wait(10)
    found: list[Any] = []

    def chain() -> None:
        try:
            found.append(rescore_next(rescore_id=rescore.pk))
        except BaseException as exc:
            found.append(exc)
        finally:
            connections.close_all()  # this thread's own, as a worker's task ends

    thread = threading.Thread(target=chain)
    thread.start()
    thread.join(2)  # the chain scores its item and waits for the thread to record it
    release.set()
    held.result(timeout=30)
    thread.join(60)
    assert found == ["done"], found
    assert _tasks(rescore.pk)[-1] == "idle"
    _whole(rescore, entries)
    assert all(item.attempts == 1 for item in rescore.items.all())


@pytest.mark.usefixtures("worker")
def test_a_forked_worker_records_on_a_thread_of_its_own() -> None:
    """The parent's kept thread does not exist in a forked child: the child makes its own
    pool, whose record runs (the inherited pool, its one thread gone and counted idle, would
    never run it)."""
    parent = rescore_overlap._kept_pool()
    assert _on_kept(lambda: 1) == 1
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no database, only the pool
        try:
            pool = rescore_overlap._kept_pool()
            ran = pool.submit(lambda: 1).result(timeout=10) == 1
            os.write(write, b"ok" if ran and pool is not parent else b"same")
        finally:
            os._exit(0)
    os.close(write)
    said = os.read(read, 16)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    assert (said, os.waitstatus_to_exitcode(status)) == (b"ok", 0)
    assert rescore_overlap._kept_pool() is parent


@pytest.mark.usefixtures("worker")
def test_the_chains_of_two_rescores_on_one_worker_in_turn_keep_each_phase_whole() -> None:
    host = host_user()
    challenge = apply_bundle(host)
    users = [make_user(username=f"t{i}") for i in range(2)]
    entries = [
        graded(*phase_submission(users[0], phase_of(challenge, "dev"), PERFECT))[2],
        graded(*phase_submission(users[1], phase_of(challenge, "dev"), ONE_WRONG))[2],
        graded(*phase_submission(users[0], phase_of(challenge, "code"), perfect_program()))[2],
    ]
    Entry.objects.update(counted=True)
    new_scorer(host)
    rescores = list(Rescore.objects.filter(version=2).order_by("pk"))
    assert len(rescores) == 2  # the dev phase's and the code phase's
    assert all(r.items.exists() for r in rescores)
    open_ = {r.pk for r in rescores}
    for _ in range(60):  # one chain task of each in turn, on the same kept thread
        for other in rescores:
            if other.pk in open_:
                close_old_connections()
                if rescore_next(rescore_id=other.pk) in ("idle", "enough"):
                    open_.discard(other.pk)
                for r in rescores:
                    _served_whole(r.phase_id)
        if not open_:
            break
    assert not open_
    for entry in entries:
        assert Score.objects.filter(entry=entry, version=2).count() == 2
    for r in rescores:
        assert set(r.items.values_list("status", flat=True)) == {"done"}
        assert Phase.objects.get(pk=r.phase_id).scoring_version == 2
        assert all(item.attempts == 1 for item in r.items.all())
