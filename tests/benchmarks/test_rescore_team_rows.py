"""A rescore records an entry's scores and its team's best rows in kept SQL
(`apps.benchmarks.services.rescore_entries`): the rows it leaves in the new version are the
ones the models' rebuild (`team_best_rebuild`, the reference) computes from the same scores,
for a team without finals (its hidden row comes from its best public scores), a team with a
final, and a team whose final does not count (it is not eligible)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from apps.benchmarks.models import Entry, Phase, Rescore, Score, TeamBest
from apps.benchmarks.services.team_best import team_best_rebuild, team_lock
from tests.benchmarks.rescoring import new_scorer, rescore_all
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

WRONG = [(), ("1",), ("1", "2")]  # best to worst


def _rows(phase: Phase, team_id: str) -> dict[str, tuple[Any, ...]]:
    rows = TeamBest.objects.filter(phase=phase, version=2, team_id=team_id)
    return {row.split: (row.score_id, row.metric_key, row.order_key) for row in rows}


def _rebuilt(phase: Phase, team_id: str) -> dict[str, tuple[Any, ...]]:
    with transaction.atomic():
        team_lock(team_id=team_id)
        team_best_rebuild(phase=phase, team_id=team_id, versions=[2])
    return _rows(phase, team_id)


def test_rescored_team_rows_are_the_rebuilds_rows() -> None:
    host = host_user()
    dev = phase_of(apply_bundle(host), "dev")
    assert dev.final_selection > 0  # the hidden split is rebuilt from finals
    teams: dict[str, list[Entry]] = {}
    for name in ("alice", "bob", "carol"):
        user = make_user(username=name)
        entries = []
        for wrong in WRONG:
            files = {"predictions.csv": predictions_csv(wrong=wrong)}
            entries.append(graded(*phase_submission(user, dev, files))[2])
        teams[name] = entries
    for entries in teams.values():
        Entry.objects.filter(pk__in=[e.pk for e in entries]).update(counted=True)
    worst = teams["bob"][2]
    Entry.objects.filter(pk=worst.pk).update(final=True)  # bob's final: his worst
    best = teams["carol"][0]
    Entry.objects.filter(pk=best.pk).update(final=True, counted=False)  # not eligible

    new_scorer(host)
    rescore_all(Rescore.objects.get(phase=dev, version=2).pk)

    for name, entries in teams.items():
        team_id = entries[0].team_id
        assert len({e.team_id for e in entries}) == 1
        rescored = 2 if name == "carol" else 3  # only counted entries are rescored
        assert Score.objects.filter(entry__in=entries, version=2).count() == rescored * 2
        found = _rows(dev, team_id)
        assert set(found) == {"public", "private"}, name
        assert found == _rebuilt(dev, team_id), name
    bob = _rows(dev, worst.team_id)
    assert Score.objects.get(pk=bob["private"][0]).entry_id == worst.pk
