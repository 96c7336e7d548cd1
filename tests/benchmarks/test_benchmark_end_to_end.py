"""The example benchmark end to end, through the API a host and participants use: the bundle
applied, its baseline scored, four participants submitting to both phases, every grading by
the worker's task in real bubblewrap sandboxes (the participant's program, then the host's
scorer against the hidden reference data), and the full leaderboard asserted: order, a shared
rank, the baseline's place, the hidden split refused and then revealed early by the host,
finals deciding the hidden rows, frozen finals, CSV; hidden scores reach no participant
before the reveal."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from datetime import timedelta
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.benchmarks.models import Baseline
from apps.benchmarks.tasks import baseline_score
from apps.grading.tasks import grade_job
from tests.benchmarks.phases import (
    apply_challenge,
    enqueue,
    make_host,
    participate,
    submit_to_phase,
)
from tests.benchmarks.scoring import perfect_program, predictions_csv, reference_labels
from tests.factories.users import make_user
from tests.grading.conftest import sandbox_settings  # noqa: F401 - the fixture

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sandbox_settings")]

BOARD = "/api/challenges/digits/phases/{phase}/leaderboard/"
LABELS = reference_labels()
PUBLIC = [key for key, (_, split) in LABELS.items() if split == "public"]
PRIVATE = [key for key, (_, split) in LABELS.items() if split == "private"]


def _open_now(document: dict[str, Any]) -> None:
    now = timezone.now()
    for phase in document["phases"]:
        phase["start"] = (now - timedelta(hours=1)).isoformat()
        phase["end"] = (now + timedelta(hours=1)).isoformat()
        phase["resources"] = {"timeout": 5, "memory_mb": 256}


def _accuracy(wrong: int, of: int = 15) -> float:
    return (of - wrong) / of


def _baseline(split: str) -> dict[str, float]:
    rows = [label for label, where in LABELS.values() if where == split]
    right = sum(1 for label in rows if label == "4")  # the majority baseline answers 4
    return {"accuracy": right / len(rows), "errors": float(len(rows) - right)}


def _submitted(client: APIClient, phase: str, files: Any) -> str:
    created = submit_to_phase(client, phase, files)
    assert created.status_code == HTTPStatus.CREATED, created.json()
    submission_id: str = created.json()["submission_id"]
    queued = enqueue(client, submission_id)
    assert queued.status_code == HTTPStatus.CREATED, queued.json()
    assert grade_job(queued.json()["job_id"]) == "completed"
    return submission_id


def _predictions(public_wrong: int, private_wrong: int) -> list[tuple[str, bytes]]:
    wrong = tuple(PUBLIC[:public_wrong] + PRIVATE[:private_wrong])
    return [("predictions.csv", predictions_csv(wrong))]


def _rows(body: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (
            row["rank"],
            None if row["team"] is None else row["team"]["name"],
            row["scores"]["accuracy"],
            row["baseline"],
            row["submission_id"],
        )
        for row in body["rows"]
    ]


def test_the_example_benchmark_end_to_end(
    client_for: Callable[[User], APIClient],
) -> None:
    host = client_for(make_host())
    apply_challenge(host, _open_now)
    for baseline in Baseline.objects.all():
        assert baseline_score(baseline.pk) == "scored"
    people = {name: client_for(make_user(username=name)) for name in ("ann", "ben", "cat", "dan")}
    for client in people.values():
        assert participate(client) == "approved"

    ann1 = _submitted(people["ann"], "dev", _predictions(1, 2))
    ben1 = _submitted(people["ben"], "dev", _predictions(1, 1))  # ties ann1 on every metric
    cat1 = _submitted(people["cat"], "dev", _predictions(3, 3))
    ann2 = _submitted(people["ann"], "dev", _predictions(2, 0))
    ann3 = _submitted(people["ann"], "dev", _predictions(4, 0))
    dan1 = _submitted(people["dan"], "code", list(perfect_program().items()))

    # The public split, read by anyone: one row per team (ann's best is ann1), ann and ben
    # tie on every metric and share rank 1 (ann submitted first), cat is third, and the
    # baseline stands where its score places it without a rank.
    public = APIClient().get(BOARD.format(phase="dev"))
    assert public.status_code == HTTPStatus.OK
    body = public.json()
    assert (body["split"], body["revealed"], body["scoring_version"]) == ("public", False, 1)
    assert [c["key"] for c in body["columns"]] == ["accuracy", "errors"]
    baseline_row = (None, None, _baseline("public")["accuracy"], True, None)
    teams = [
        (1, "ann", _accuracy(1), False, ann1),
        (1, "ben", _accuracy(1), False, ben1),
        (3, "cat", _accuracy(3), False, cat1),
    ]
    expected = sorted(
        [*teams, baseline_row], key=lambda row: -row[2]
    )  # stable: teams before an equal baseline
    assert [r[:4] for r in _rows(body)] == [r[:4] for r in expected]
    assert [r[4] for r in _rows(body) if not r[3]] == [ann1, ben1, cat1]
    code = APIClient().get(BOARD.format(phase="code")).json()
    assert [(r[0], r[1], r[2]) for r in _rows(code) if not r[3]] == [(1, "dan", 1.0)]
    assert dan1 in {r[4] for r in _rows(code)}

    # The hidden split: refused to participants and anonymous callers, shown to the host.
    for reader in (APIClient(), people["ann"]):
        hidden = reader.get(BOARD.format(phase="dev") + "?split=private")
        assert hidden.status_code == HTTPStatus.FORBIDDEN
        assert hidden.json()["code"] == "not_revealed"
    assert host.get(BOARD.format(phase="dev") + "?split=private").status_code == HTTPStatus.OK
    # No hidden score reaches a participant before the reveal, in any answer they can read.
    secret = repr(_accuracy(2))  # ann1's private accuracy
    for path in (f"/api/submissions/{ann1}/", "/api/submissions/", "/api/jobs/"):
        assert secret not in people["ann"].get(path).content.decode()

    # Finals: two at most; someone else's submission is refused; a third is too many.
    final = "/api/submissions/{}/final/"
    assert people["ann"].post(final.format(ann1)).status_code == HTTPStatus.OK
    assert people["ann"].post(final.format(ann2)).status_code == HTTPStatus.OK
    too_many = people["ann"].post(final.format(ann3))
    assert (too_many.status_code, too_many.json()["code"]) == (
        HTTPStatus.CONFLICT,
        "too_many_finals",
    )
    assert people["ben"].post(final.format(ann3)).json()["code"] == "permission_denied"
    assert people["ann"].delete(final.format(ann2)).status_code == HTTPStatus.OK

    # The host reveals early; the hidden split is now everyone's. ann is judged on her final
    # (ann1: 2 private errors) although ann2 and ann3 were perfect there; ben and cat, who
    # chose nothing, on their best by the public split.
    revealed = host.post("/api/challenges/digits/phases/dev/reveal/")
    assert revealed.status_code == HTTPStatus.OK, revealed.json()
    private = APIClient().get(BOARD.format(phase="dev") + "?split=private").json()
    assert private["revealed"] is True
    assert [r for r in _rows(private) if not r[3]] == [
        (1, "ben", _accuracy(1), False, ben1),
        (2, "ann", _accuracy(2), False, ann1),
        (3, "cat", _accuracy(3), False, cat1),
    ]
    assert [r[2] for r in _rows(private) if r[3]] == [_baseline("private")["accuracy"]]
    frozen = people["ann"].post(final.format(ann2))
    assert (frozen.status_code, frozen.json()["code"]) == (HTTPStatus.CONFLICT, "finals_frozen")

    # CSV: the same rows.
    exported: Any = APIClient().get(BOARD.format(phase="dev") + "?split=private&format=csv")
    assert exported.status_code == HTTPStatus.OK
    assert exported["Content-Type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(b"".join(exported.streaming_content).decode())))
    assert [(row["rank"], row["team"]) for row in table if row["baseline"] == "false"] == [
        ("1", "ben"),
        ("2", "ann"),
        ("3", "cat"),
    ]
    assert [float(row["accuracy"]) for row in table if row["baseline"] == "true"] == [
        _baseline("private")["accuracy"]
    ]
