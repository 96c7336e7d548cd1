"""A bundle is applied whole or not at all, and racing applies of one slug never duplicate a
challenge or a version (real threads, SQLite and PostgreSQL)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db.models.signals import post_save

from apps.benchmarks.models import Challenge, ChallengeHost, Metric, Phase
from apps.benchmarks.services.apply import ApplyResult, challenge_apply
from tests.benchmarks.bundles import bundle, grant_add_challenge
from tests.concurrency import run_concurrently
from tests.factories.users import make_user

RACERS = 6


def _write(tmp_path: Path, data: bytes, name: str) -> tuple[Path, str]:
    path = tmp_path / name
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


def _titled(title: str) -> Any:
    def change(doc: dict[str, Any]) -> None:
        doc["title"] = title

    return change


def _stored() -> list[Path]:
    return sorted((Path(settings.MEDIA_ROOT) / "bundles").rglob("*.zip"))


class PlantedFault(Exception):
    """A fault raised while the rows of an apply are half written."""


@pytest.fixture
def fault_at_the_second_phase() -> Iterator[None]:
    """Fail an apply at the second phase's row: after the challenge row, the hosts and the
    first phase with its metrics were written (a real signal, sent inside the transaction)."""

    def on_phase(sender: Any, instance: Phase, **kwargs: Any) -> None:
        if instance.slug == "code":
            raise PlantedFault

    post_save.connect(on_phase, sender=Phase, weak=False)
    try:
        yield
    finally:
        post_save.disconnect(on_phase, sender=Phase)


@pytest.mark.django_db(transaction=True)
def test_a_failing_apply_leaves_the_previous_version_intact(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    host = grant_add_challenge(make_user(username="alice"))
    first, first_sha = _write(tmp_path, bundle(), "v1.zip")
    challenge_apply(user=host, bundle_path=first, sha256=first_sha)

    def changed(doc: dict[str, Any]) -> None:
        doc["title"] = "Half applied"
        doc["phases"][0]["metrics"][0]["label"] = "Changed"
        doc["phases"][1]["limits"]["per_day"] = 9

    second, second_sha = _write(tmp_path, bundle(changed), "v2.zip")
    request.getfixturevalue("fault_at_the_second_phase")
    with pytest.raises(PlantedFault):
        challenge_apply(user=host, bundle_path=second, sha256=second_sha)

    challenge = Challenge.objects.get()
    assert challenge.bundle_version == 1
    assert challenge.bundle_sha256 == first_sha
    assert challenge.title == "Handwritten digits (tiny)"
    assert Metric.objects.get(phase__slug="dev", key="accuracy").label == "Accuracy"
    assert Phase.objects.get(slug="code").limit_per_day == 3
    assert [p.name for p in _stored()] == ["bundle.zip"]
    assert str(_stored()[0]).endswith(challenge.bundle_file)


@pytest.mark.django_db(transaction=True)
def test_racing_applies_of_one_slug_make_one_challenge_and_versions_without_gaps(
    tmp_path: Path,
) -> None:
    host = grant_add_challenge(make_user(username="alice"))
    bundles = [_write(tmp_path, bundle(_titled(f"Title {i}")), f"b{i}.zip") for i in range(RACERS)]

    def apply(index: int) -> ApplyResult:
        path, sha = bundles[index]
        return challenge_apply(user=host, bundle_path=path, sha256=sha)

    outcomes = run_concurrently(apply, RACERS)

    assert [o.error for o in outcomes] == [None] * RACERS
    results = [o.value for o in outcomes]
    assert sum(r.created for r in results) == 1
    versions = sorted(r.challenge.bundle_version for r in results)
    assert versions == list(range(1, RACERS + 1))
    challenge = Challenge.objects.get()
    assert challenge.bundle_version == RACERS
    winner = next(r for r in results if r.challenge.bundle_version == RACERS)
    assert challenge.title == winner.challenge.title
    assert Phase.objects.filter(challenge=challenge).count() == 2
    assert ChallengeHost.objects.filter(challenge=challenge).count() == 1


@pytest.mark.django_db(transaction=True)
def test_racing_applies_by_a_host_and_a_stranger_never_let_the_stranger_change_it(
    tmp_path: Path,
) -> None:
    alice = grant_add_challenge(make_user(username="alice"))
    mallory: User = grant_add_challenge(make_user(username="mallory"))
    by_alice = _write(tmp_path, bundle(_titled("Alice's")), "a.zip")
    by_mallory = _write(tmp_path, bundle(_titled("Mallory's")), "m.zip")

    def apply(index: int) -> ApplyResult:
        user, (path, sha) = [(alice, by_alice), (mallory, by_mallory)][index]
        return challenge_apply(user=user, bundle_path=path, sha256=sha)

    outcomes = run_concurrently(apply, 2)

    challenge = Challenge.objects.get()
    succeeded = [o for o in outcomes if o.ok]
    refused = [o for o in outcomes if not o.ok]
    assert len(succeeded) == 1
    assert challenge.bundle_version == 1
    # Whoever created first became the only host; the other's apply was refused cleanly.
    assert [type(o.error).__name__ for o in refused] == ["PermissionDenied"]
    assert len(_stored()) == 1
