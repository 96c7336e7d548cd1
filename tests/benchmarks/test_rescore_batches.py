"""The database work of one rescore item (SPEC §11.6), pinned: one query reads the item with
its entry, phase, challenge and submission, the version's plan is read once per worker
process, scores and the team's best rows are written in bulk, and the switch is checked with
one read. A chain task scores items in a row while no job is queued, and yields its worker
after one item when a new submission's job is waiting."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.benchmarks.models import Entry, Phase, Rescore, RescoreItem, RescoreItemStatus, Score
from apps.benchmarks.services.rescoring import rescore_next
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

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("sandbox_settings")]

PERFECT = {"predictions.csv": predictions_csv()}

# Queries of one entry's item once the worker has the version's plan (a phase with finals:
# its hidden split's best row is rebuilt from the team's finals). SQLite counts its
# `BEGIN IMMEDIATE`. With RESCORE_BATCH = 1 each item is a task, so this counts the task's
# own reads too (the chains at work, the switch check) that a batch of 20 pays once. An item
# took 35 queries on SQLite at first, 23 with batches and a plan kept per worker; since, the
# plan carries the phase's splits (-1) and a task first counts the chains at work (+1); then
# 12 with the entry's item read in one statement (with its files) and its scores, team rows
# and hidden split's rebuild one statement each, no savepoints (`rescore_entries`). PostgreSQL
# takes the team's row lock (+1); then the item's take, lease and read in one statement on
# PostgreSQL (-2, `rescore_takes`). The task that carries the chain on is enqueued in the
# same task: one more INSERT with the ORM broker (`ENQUEUE_QUERIES`), none with Redis.
# Counted with the records in the chain's own thread (RESCORE_OVERLAP off); with it on, the
# record's statements (BEGIN, the outcome, the team's lock on PostgreSQL, the scores, two team
# rows, COMMIT) run on the recorder's connection, not the chain's. On PostgreSQL the take and
# an entry's record are one function call each (`rescore_takes`, `rescore_records`): the
# record's 7 statements are one (-6).
ITEM_QUERIES = {"sqlite": 11, "postgresql": 4}
ENQUEUE_QUERIES = 1 if "orm" in django_settings.Q_CLUSTER else 0
RECORD_QUERIES = {"sqlite": 6, "postgresql": 1}


def _rescoring(users: int) -> tuple[Phase, Rescore, list[Entry]]:
    """`users` counted, graded submissions of the dev phase, then a new scorer (version 2)."""
    host = host_user()
    dev = phase_of(apply_bundle(host), "dev")
    entries = []
    for n in range(users):
        entry = graded(*phase_submission(make_user(username=f"user{n}"), dev, PERFECT))[2]
        Entry.objects.filter(pk=entry.pk).update(counted=True)
        entries.append(entry)
    new_scorer(host)
    return dev, Rescore.objects.get(phase=dev, version=2), entries


def _done() -> int:
    return RescoreItem.objects.filter(status=RescoreItemStatus.DONE).count()


@pytest.mark.parametrize("overlap", [False, True])
def test_one_item_costs_a_pinned_number_of_queries(settings: Any, overlap: bool) -> None:
    settings.RESCORE_BATCH = 1
    settings.RESCORE_OVERLAP = overlap
    _, rescore, _ = _rescoring(3)
    assert rescore_next(rescore_id=rescore.pk) == "done"  # the worker reads the plan once
    with CaptureQueriesContext(connection) as queries:
        assert rescore_next(rescore_id=rescore.pk) == "done"
    assert _done() == 2
    # Two items done, whichever the database handed out first: public and private each.
    assert Score.objects.filter(phase_id=rescore.phase_id, version=2).count() == 2 * 2
    expected = (
        ITEM_QUERIES[connection.vendor]
        + ENQUEUE_QUERIES
        - RECORD_QUERIES[connection.vendor] * overlap
    )
    assert len(queries.captured_queries) == expected, [q["sql"][:90] for q in queries]


def test_a_chain_scores_items_in_a_row_while_no_job_waits(settings: Any) -> None:
    settings.RESCORE_BATCH = 20
    phase, rescore, entries = _rescoring(3)
    assert rescore_next(rescore_id=rescore.pk) == "idle"  # one task: every item, the switch
    assert _done() == 4  # three entries and the baseline
    assert Phase.objects.get(pk=phase.pk).scoring_version == 2
    for entry in entries:  # each (submission, version) scored once
        assert Score.objects.filter(entry=entry, version=2).count() == 2


def test_a_waiting_job_takes_the_worker_after_one_item(settings: Any) -> None:
    settings.RESCORE_BATCH = 20
    phase, rescore, _ = _rescoring(3)
    phase_submission(make_user(username="newcomer"), phase, PERFECT)  # its job is queued
    assert rescore_next(rescore_id=rescore.pk) == "done"
    assert _done() == 1  # the chain handed its worker over
    assert Phase.objects.get(pk=phase.pk).scoring_version == 1


def test_the_batch_size_bounds_a_task(settings: Any) -> None:
    settings.RESCORE_BATCH = 2
    phase, rescore, _ = _rescoring(3)
    assert rescore_next(rescore_id=rescore.pk) == "done"
    assert _done() == 2
    assert Phase.objects.get(pk=phase.pk).scoring_version == 1


def test_a_chain_on_top_of_enough_working_ones_ends_at_once(settings: Any) -> None:
    """A result added while the rescore runs starts one more chain (`rescore_entry_add`): with
    RESCORE_WORKERS chains holding live leases it ends without taking an item, so new
    submissions keep their worker; once the leases are gone it works again."""
    settings.RESCORE_WORKERS = 1
    phase, rescore, _ = _rescoring(2)
    held = RescoreItem.objects.filter(rescore=rescore).order_by("pk").first()
    assert held is not None
    RescoreItem.objects.filter(pk=held.pk).update(
        status=RescoreItemStatus.PROCESSING,
        lease_token="another-chain",
        lease_expires_at=timezone.now() + dt.timedelta(minutes=5),
        attempts=1,
    )
    assert rescore_next(rescore_id=rescore.pk) == "enough"
    assert _done() == 0
    settings.RESCORE_WORKERS = 2  # room for one more chain
    assert rescore_next(rescore_id=rescore.pk) == "idle"
    assert _done() == 2  # the other entry and the baseline; the held item stays with its chain
    assert Phase.objects.get(pk=phase.pk).scoring_version == 1
