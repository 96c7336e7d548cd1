"""A chain records an item on a thread of its own while it scores the next one
(`rescore_overlap`, SPEC §11.6). Here the records are held up by a lock the test takes once
the first scorer runs (the teams' rows on PostgreSQL, the database's write lock on SQLite),
and the real cluster is killed with SIGKILL while an item is scored but not recorded (on
PostgreSQL the chain has scored its next item meanwhile, and the first one's record, one
function call, has reached the server, which finishes it once the lock is free). Once those
leases expire a second cluster scores each item not recorded again: every (submission,
version) gets its scores exactly once, every item ends `done` and the leaderboard switches."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest
from django.db import connection, connections, transaction

from apps.benchmarks.models import Entry, Phase, Rescore, RescoreItem, Score, Team
from tests.benchmarks.rescoring import new_scorer
from tests.benchmarks.scoring import (
    apply_bundle,
    graded,
    host_user,
    phase_of,
    phase_submission,
    predictions_csv,
)
from tests.factories.users import make_user
from tests.grading.conftest import sandbox_settings  # noqa: F401 - the fixture
from tests.grading.sandboxes import processes_with_argument, sleep_argument
from tests.grading.test_crash import start_cluster  # noqa: F401 - the fixture
from tests.processes import wait_for


class RecordBlocker(threading.Thread):
    """Holds a write transaction that locks every team's row until released: an entry's
    record waits for its team's lock (PostgreSQL) or for the write lock (SQLite)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.holding = threading.Event()
        self.release = threading.Event()

    def run(self) -> None:
        try:
            with transaction.atomic():
                list(Team.objects.select_for_update().values_list("pk", flat=True))
                self.holding.set()
                self.release.wait(60)
        finally:
            connections.close_all()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("sandbox_settings")
def test_a_chain_killed_with_an_item_scored_but_not_recorded_scores_it_once_later(
    start_cluster: Any,  # noqa: F811 - the fixture
) -> None:
    from django_q.brokers.orm import ORM
    from django_q.conf import Conf
    from django_q.models import OrmQ
    from django_q.tasks import async_task

    host = host_user()
    dev = phase_of(apply_bundle(host), "dev")
    users = [make_user(username=f"o{i}") for i in range(3)]
    entries = [
        graded(*phase_submission(u, dev, {"predictions.csv": predictions_csv(wrong=wrong)}))[2]
        for u, wrong in zip(users, [(), ("1",), ("1", "2")], strict=True)
    ]
    Entry.objects.update(counted=True)
    marker = sleep_argument(2)
    new_scorer(host, sleep=marker)
    OrmQ.objects.all().delete()
    rescore = Rescore.objects.get(phase=dev, version=2)

    # GRADING_TIMEOUT 5 s -> a lease of 6.25 s; the broker re-delivers after 16 s.
    timings = {"GRADING_TIMEOUT": "5", "Q_TIMEOUT": "12", "Q_RETRY": "16"}
    first = start_cluster("first", **timings)
    async_task("apps.benchmarks.tasks.rescore_next", rescore.pk, broker=ORM(list_key=Conf.PREFIX))
    wait_for(lambda: bool(processes_with_argument(marker)), 60, "the first item's scorer")
    blocker = RecordBlocker()  # while the first item's 2 s scorer runs
    blocker.start()
    assert blocker.holding.wait(10)
    time.sleep(5)  # two scorers' time: an entry's item is scored and its record waits
    items = RescoreItem.objects.filter(rescore=rescore)
    scoring = list(items.filter(status="processing"))
    if connection.vendor == "postgresql":
        # An item waits to be recorded; the chain has scored the next one meanwhile.
        assert len(scoring) == 2
    else:
        assert len(scoring) == 1  # the next take waits for the write lock as well
    assert not Score.objects.filter(version=2, entry__isnull=False).exists()
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    blocker.release.set()
    blocker.join(timeout=10)
    wait_for(lambda: not processes_with_argument(marker), 5, "the sandbox to end")

    second = start_cluster("second", **timings)
    wait_for(
        lambda: Phase.objects.get(pk=dev.pk).scoring_version == 2,
        120,
        "the re-delivered chain to finish the rescore after the leases expired",
    )
    second.send_signal(signal.SIGTERM)
    second.wait(timeout=15)

    for entry in entries:  # each (submission, version) scored exactly once, per split
        assert Score.objects.filter(entry=entry, version=2).count() == 2
    assert {item.status for item in items} == {"done"}
    attempts = sorted(items.get(pk=item.pk).attempts for item in scoring)
    if connection.vendor == "postgresql":
        # The record was one call the killed worker had sent whole: the server finished it
        # once the teams' rows were free (its first attempt). The item scored meanwhile was
        # taken again once its lease expired: a second attempt.
        assert attempts == [1, 2]
    else:  # taken again once its lease expired: a second attempt
        assert attempts == [2]
