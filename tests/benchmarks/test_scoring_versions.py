"""A bundle that changes a phase's scoring program or reference data (by content) makes a new
scoring version and keeps the stored bundle of every version; other changes keep the version;
a baseline keeps its scores unless its folder changed."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from apps.benchmarks.models import Baseline, Challenge, Phase, Score
from apps.benchmarks.services.scores import baseline_scores_record
from tests.benchmarks.bundles import bundle, example_files
from tests.benchmarks.conftest import Apply

SCORER = "scoring/score.py"
LABELS = "data/ref/labels.csv"


def _versions(slug: str = "dev") -> list[tuple[int, str]]:
    phase = Phase.objects.get(slug=slug)
    return [(v.number, v.bundle_file) for v in phase.scoring_versions.order_by("number")]


def test_a_changed_scorer_or_reference_is_a_new_version_and_keeps_every_versions_bundle(
    host: User, apply_as: Callable[[User], Apply], django_capture_on_commit_callbacks: Any
) -> None:
    files = example_files()
    apply_as(host)(bundle())
    with django_capture_on_commit_callbacks(execute=True):
        scorer = apply_as(host)(bundle(extra={SCORER: files[SCORER] + b"\n# fixed\n"}))
    with django_capture_on_commit_callbacks(execute=True):
        reference = apply_as(host)(
            bundle(extra={SCORER: files[SCORER] + b"\n# fixed\n", LABELS: files[LABELS] + b""})
        )
    with django_capture_on_commit_callbacks(execute=True):
        labels = apply_as(host)(
            bundle(
                extra={
                    SCORER: files[SCORER] + b"\n# fixed\n",
                    LABELS: files[LABELS].replace(b"\n", b"\r\n"),
                }
            )
        )

    assert scorer.status_code == HTTPStatus.OK
    assert reference.status_code == HTTPStatus.OK  # the same bytes: no change at all
    assert labels.status_code == HTTPStatus.OK
    versions = _versions()
    assert [n for n, _ in versions] == [1, 2, 3]
    assert versions[2][1] == Challenge.objects.get().bundle_file
    root = Path(settings.MEDIA_ROOT)
    assert all((root / name).is_file() for _, name in versions)
    # The leaderboard keeps serving version 1 until a rescore switches it.
    assert Phase.objects.get(slug="dev").scoring_version == 1


def test_a_change_of_anything_else_keeps_the_version(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    apply_as(host)(bundle())

    def retitled(doc: dict[str, Any]) -> None:
        doc["phases"][0]["title"] = "Renamed"
        doc["phases"][0]["limits"]["per_day"] = 9

    response = apply_as(host)(bundle(retitled))

    assert response.json()["bundle_version"] == 2
    assert [n for n, _ in _versions()] == [1]


def test_a_baseline_keeps_its_scores_unless_its_folder_changed(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    apply_as(host)(bundle())
    baseline = Baseline.objects.get(phase__slug="dev")
    with transaction.atomic():
        baseline_scores_record(
            baseline=baseline,
            version=1,
            splits={"public": {"accuracy": 0.1, "errors": 9.0}},
        )

    def retitled(doc: dict[str, Any]) -> None:
        doc["title"] = "Digits, renamed"

    apply_as(host)(bundle(retitled))
    kept = Score.objects.filter(baseline__phase__slug="dev").count()
    apply_as(host)(
        bundle(
            retitled,
            extra={"baselines/majority/predictions.csv": b"id,label\n0,1\n"},
        )
    )

    assert kept == 1
    assert Baseline.objects.get(phase__slug="dev").pk == baseline.pk
    assert not Score.objects.filter(baseline__phase__slug="dev").exists()
