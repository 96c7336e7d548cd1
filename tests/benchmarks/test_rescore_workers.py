"""A rescore by real `manage.py qcluster` workers with a slow new scorer, while the test
polls the leaderboard: every answer is all version 1 or all version 2, the version never goes
backwards, and a cluster killed with SIGKILL mid-rescore (its task re-delivered by the
broker to a second cluster) still scores each (submission, version) exactly once, with no
limit used and nothing counted changed."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connections
from rest_framework.test import APIClient

from apps.benchmarks.models import Entry, Phase, Rescore, RescoreItem, Score
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

BOARD = "/api/challenges/digits/phases/dev/leaderboard/"


class BoardPoller(threading.Thread):
    """Reads the public leaderboard over and over; keeps (version, {submission: accuracy})."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stopped = threading.Event()
        self.seen: list[tuple[int, dict[str, float]]] = []
        self.errors: list[str] = []

    def run(self) -> None:
        client = APIClient()
        try:
            while not self.stopped.is_set():
                response = client.get(BOARD)
                if response.status_code != HTTPStatus.OK:
                    self.errors.append(f"{response.status_code}: {response.content!r}")
                    continue
                body = response.json()
                rows = {
                    row["submission_id"]: row["scores"]["accuracy"]
                    for row in body["rows"]
                    if not row["baseline"]
                }
                self.seen.append((body["scoring_version"], rows))
                self.stopped.wait(0.05)
        finally:
            connections.close_all()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("sandbox_settings")
def test_a_slow_rescore_switches_in_one_step_and_survives_a_killed_worker(
    client_for: Callable[[User], APIClient],
    start_cluster: Any,  # noqa: F811 - the fixture
) -> None:
    from django_q.brokers.orm import ORM
    from django_q.conf import Conf
    from django_q.models import OrmQ
    from django_q.tasks import async_task

    host = host_user()
    challenge = apply_bundle(host)
    dev = phase_of(challenge, "dev")
    users = [make_user(username=f"p{i}") for i in range(3)]
    entries = [
        graded(*phase_submission(u, dev, {"predictions.csv": predictions_csv(wrong=wrong)}))[2]
        for u, wrong in zip(users, [(), ("1",), ("1", "2")], strict=True)
    ]
    Entry.objects.update(counted=True)
    old = {
        s.entry_id: s.values["accuracy"]
        for s in Score.objects.filter(version=1, split="public", entry__isnull=False)
    }
    me_before = client_for(users[0]).get("/api/challenges/digits/phases/dev/me/").json()

    marker = sleep_argument(1)
    new_scorer(host, sleep=marker)
    OrmQ.objects.all().delete()  # what the applies enqueued: started below, on this broker
    rescore = Rescore.objects.get(phase=dev, version=2)
    poller = BoardPoller()
    poller.start()

    timings = {"GRADING_TIMEOUT": "5", "Q_TIMEOUT": "12", "Q_RETRY": "16"}
    first = start_cluster("first", **timings)
    async_task("apps.benchmarks.tasks.rescore_next", rescore.pk, broker=ORM(list_key=Conf.PREFIX))

    def one_done_and_one_scoring() -> bool:
        done = RescoreItem.objects.filter(rescore=rescore, status="done").count()
        return done >= 1 and bool(processes_with_argument(marker))

    wait_for(one_done_and_one_scoring, 60, "one item scored and the next one scoring")
    killed = RescoreItem.objects.get(rescore=rescore, status="processing")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    wait_for(lambda: not processes_with_argument(marker), 5, "the sandbox to end")
    assert Phase.objects.get(pk=dev.pk).scoring_version == 1

    second = start_cluster("second", **timings)
    wait_for(
        lambda: Phase.objects.get(pk=dev.pk).scoring_version == 2,
        120,
        "the re-delivered work to finish the rescore",
    )
    wait_for(lambda: poller.seen[-1][0] == 2, 30, "the poller to read the new version")
    poller.stopped.set()
    poller.join(timeout=10)
    second.send_signal(signal.SIGTERM)
    second.wait(timeout=15)

    assert poller.errors == []
    versions = [version for version, _ in poller.seen]
    assert versions == sorted(versions), "the served version went backwards"
    assert versions[0] == 1
    assert versions[-1] == 2
    for version, rows in poller.seen:
        expected = {pk: value / version for pk, value in old.items()}  # v2 halves accuracy
        assert rows == pytest.approx(expected), f"a mixed answer in version {version}"
    for entry in entries:
        assert Score.objects.filter(entry=entry, version=2).count() == 2  # one per split
    items = RescoreItem.objects.filter(rescore=rescore)
    assert {item.status for item in items} == {"done"}
    assert items.get(pk=killed.pk).attempts == 2
    assert all(Entry.objects.values_list("counted", flat=True))
    me_after = client_for(users[0]).get("/api/challenges/digits/phases/dev/me/").json()
    assert me_after["limits"] == me_before["limits"]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("sandbox_settings")
def test_a_stopped_worker_gives_its_item_back_uncounted(
    start_cluster: Any,  # noqa: F811 - the fixture
) -> None:
    from django_q.brokers.orm import ORM
    from django_q.conf import Conf
    from django_q.models import OrmQ
    from django_q.tasks import async_task

    host = host_user()
    challenge = apply_bundle(host)
    dev = phase_of(challenge, "dev")
    graded(
        *phase_submission(make_user(username="sol"), dev, {"predictions.csv": predictions_csv()})
    )
    Entry.objects.update(counted=True)
    marker = sleep_argument(30)
    new_scorer(host, sleep=marker)
    OrmQ.objects.all().delete()
    rescore = Rescore.objects.get(phase=dev, version=2)
    cluster = start_cluster("stopped", GRADING_TIMEOUT="40", Q_TIMEOUT="90", Q_RETRY="120")
    async_task("apps.benchmarks.tasks.rescore_next", rescore.pk, broker=ORM(list_key=Conf.PREFIX))
    wait_for(lambda: bool(processes_with_argument(marker)), 60, "the slow scorer to run")

    cluster.send_signal(signal.SIGTERM)
    cluster.wait(timeout=15)  # not the scorer's 30 s

    assert not processes_with_argument(marker)
    statuses = list(RescoreItem.objects.filter(rescore=rescore).values_list("status", "attempts"))
    assert ("processing", 1) not in statuses
    assert sorted(statuses) == [("pending", 0), ("pending", 0)]  # the entry and the baseline
    assert OrmQ.objects.count() == 1  # the chain, enqueued again for the next worker
    assert Phase.objects.get(pk=dev.pk).scoring_version == 1
