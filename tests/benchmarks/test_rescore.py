"""Rescoring in a new scoring version (SPEC §11.6), in real bubblewrap sandboxes: every
counted, completed submission (both kinds, a code phase from its kept predictions without
running the program again) and every baseline is scored once in version 2, the leaderboard
switches then and only then, limits and `counted` are untouched, and hosts see progress,
retry failures and cancel."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.benchmarks.models import Entry, Phase, Rescore, RescoreItem, RescoreState
from apps.grading.models import GradingAttempt
from apps.submissions.models import SubmissionStatus
from tests.benchmarks.rescoring import (
    CRASHING_SCORER,
    new_scorer,
    rescore_all,
    scores_by_version,
)
from tests.benchmarks.scoring import (
    apply_bundle,
    graded,
    host_user,
    perfect_program,
    phase_of,
    phase_submission,
    predictions_csv,
)
from tests.factories.users import make_user
from tests.grading.conftest import sandbox_settings  # noqa: F401 - the fixture

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("sandbox_settings")]

PERFECT = {"predictions.csv": predictions_csv()}
ONE_WRONG = {"predictions.csv": predictions_csv(wrong=("1",))}


def _url(slug: str, phase: str, tail: str = "") -> str:
    return f"/api/challenges/{slug}/phases/{phase}/{tail}"


def _board(client: APIClient, phase: str, **query: Any) -> dict[str, Any]:
    response = client.get(_url("digits", phase, "leaderboard/"), query)
    assert response.status_code == HTTPStatus.OK, response.content
    body: dict[str, Any] = response.json()
    return body


def test_a_new_scorer_rescores_every_counted_submission_once_then_the_board_switches(
    client_for: Callable[[User], APIClient],
) -> None:
    host = host_user()
    challenge = apply_bundle(host)
    alice, bob = make_user(username="alice"), make_user(username="bob")
    dev, code = phase_of(challenge, "dev"), phase_of(challenge, "code")
    graded_entries = [
        graded(*phase_submission(alice, dev, PERFECT))[2],
        graded(*phase_submission(bob, dev, ONE_WRONG))[2],
        graded(*phase_submission(alice, code, perfect_program()))[2],
    ]
    for entry in graded_entries:
        Entry.objects.filter(pk=entry.pk).update(counted=True)
    code_entry = graded_entries[2]
    assert code_entry.kept_predictions  # the run stage's /output, stored
    attempts = GradingAttempt.objects.count()
    me_before = client_for(alice).get(_url("digits", "dev", "me/")).json()["limits"]

    new_scorer(host)

    rescore = Rescore.objects.get(phase=dev)
    assert (rescore.version, rescore.state) == (2, RescoreState.RUNNING)
    assert rescore.items.count() == 3  # two entries and the baseline
    host_client = client_for(host)
    progress = host_client.get(_url("digits", "dev", "rescore/")).json()
    assert progress == {
        "version": 2,
        "done": 0,
        "failed": 0,
        "total": 3,
        "state": "running",
        "scoring_version": 1,
    }
    assert _board(APIClient(), "dev")["scoring_version"] == 1

    for phase in (dev, code):
        rescore_all(Rescore.objects.get(phase=phase).pk)

    assert Phase.objects.get(pk=dev.pk).scoring_version == 2
    assert Phase.objects.get(pk=code.pk).scoring_version == 2
    assert host_client.get(_url("digits", "dev", "rescore/")).json() == {
        "version": 2,
        "done": 3,
        "failed": 0,
        "total": 3,
        "state": "switched",
        "scoring_version": 2,
    }
    for entry in graded_entries:
        scores = scores_by_version(entry)
        assert sorted(scores) == [1, 2]
        for split, values in scores[2].items():
            assert values["accuracy"] == pytest.approx(scores[1][split]["accuracy"] / 2)
            assert values["errors"] == scores[1][split]["errors"]
    board = _board(APIClient(), "dev")
    assert board["scoring_version"] == 2
    assert [row["scores"]["accuracy"] for row in board["rows"] if not row["baseline"]] == [
        pytest.approx(0.5),
        pytest.approx(
            _board(APIClient(), "dev", scoring_version=1)["rows"][1]["scores"]["accuracy"] / 2
        ),
    ]
    # Stage 1 never ran again; nothing counted changed, no limit was used.
    assert GradingAttempt.objects.count() == attempts
    assert all(e.counted for e in Entry.objects.all())
    assert client_for(alice).get(_url("digits", "dev", "me/")).json()["limits"] == me_before


def test_forced_redelivery_scores_each_submission_once_per_version(settings: Any) -> None:
    import threading

    settings.RESCORE_WORKERS = 4  # the four deliveries below all work at once

    host = host_user()
    challenge = apply_bundle(host)
    dev = phase_of(challenge, "dev")
    entries = [
        graded(*phase_submission(make_user(username=f"u{i}"), dev, PERFECT))[2] for i in range(3)
    ]
    Entry.objects.update(counted=True)
    new_scorer(host)
    rescore = Rescore.objects.get(phase=dev)
    errors: list[BaseException] = []

    def worker() -> None:
        from django.db import connections

        try:
            rescore_all(rescore.pk)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # And every task delivered once more, late.
    rescore_all(rescore.pk)

    assert errors == []
    assert Phase.objects.get(pk=dev.pk).scoring_version == 2
    for entry in entries:
        assert sorted(scores_by_version(entry)) == [1, 2]
        assert entry.scores.filter(version=2).count() == 2  # one per split
    assert set(RescoreItem.objects.values_list("status", flat=True)) == {"done"}


def test_a_failing_scorer_is_shown_to_hosts_and_retried_and_cancel_keeps_version_1(
    client_for: Callable[[User], APIClient],
) -> None:
    host = host_user()
    challenge = apply_bundle(host)
    dev = phase_of(challenge, "dev")
    entry = graded(*phase_submission(make_user(username="carol"), dev, PERFECT))[2]
    Entry.objects.filter(pk=entry.pk).update(counted=True)
    host_client = client_for(host)

    new_scorer(host, body=CRASHING_SCORER)
    rescore_all(Rescore.objects.get(phase=dev, version=2).pk)

    progress = host_client.get(_url("digits", "dev", "rescore/")).json()
    assert (progress["done"], progress["failed"], progress["total"]) == (0, 2, 2)
    item = RescoreItem.objects.filter(entry=entry).get()
    assert item.failure == "scoring_failed"
    # A recorded failure counts as settled: the board switched, counted unchanged.
    assert progress["scoring_version"] == 2
    assert Entry.objects.get(pk=entry.pk).counted
    assert Entry.objects.get(pk=entry.pk).submission.status == SubmissionStatus.COMPLETED
    retried = host_client.post(_url("digits", "dev", "rescore/retry/")).json()
    assert (retried["done"], retried["failed"], retried["total"]) == (0, 0, 2)

    # Version 3 (the halving scorer), cancelled: the board stays on version 2.
    new_scorer(host)
    assert Rescore.objects.get(phase=dev, version=2).state == RescoreState.SWITCHED
    cancelled = host_client.post(_url("digits", "dev", "rescore/cancel/"))
    assert cancelled.status_code == HTTPStatus.OK
    assert cancelled.json()["state"] == "cancelled"
    assert rescore_all(Rescore.objects.get(phase=dev, version=3).pk) == ["idle"]
    assert Phase.objects.get(pk=dev.pk).scoring_version == 2
    assert _board(APIClient(), "dev")["scoring_version"] == 2
    again = host_client.post(_url("digits", "dev", "rescore/cancel/"))
    assert again.status_code == HTTPStatus.CONFLICT
    assert again.json()["code"] == "rescore_not_running"


def test_only_hosts_see_or_change_a_rescore(client_for: Callable[[User], APIClient]) -> None:
    host = host_user()
    apply_bundle(host)
    stranger = client_for(make_user(username="mallory"))
    for method, tail in (
        ("get", "rescore/"),
        ("post", "rescore/retry/"),
        ("post", "rescore/cancel/"),
    ):
        response = getattr(stranger, method)(_url("digits", "dev", tail))
        assert response.status_code == HTTPStatus.FORBIDDEN
        assert response.json()["code"] == "permission_denied"
    assert client_for(host).get(_url("digits", "nope", "rescore/")).status_code == 404
    assert client_for(host).get(_url("digits", "dev", "rescore/")).json()["state"] == "none"
