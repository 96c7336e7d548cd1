"""Leaderboards for the tests: a challenge applied from the example bundle (through the apply
service), teams, completed phase submissions and their scores written by the one writer of
scores, as a result's transaction writes them."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from apps.benchmarks.models import Baseline, Entry, Phase, Team, TeamMember
from apps.benchmarks.services.apply import challenge_apply
from apps.benchmarks.services.scores import baseline_scores_record, entry_scores_record
from apps.submissions.models import Submission, SubmissionStatus
from tests.benchmarks.bundles import bundle, grant_add_challenge
from tests.factories.users import make_user

BOARD = "/api/challenges/digits/phases/dev/leaderboard/"
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.get_current_timezone())


def make_phase(
    tmp_path: Path,
    change: Callable[[dict[str, Any]], None] | None = None,
    *,
    host: User | None = None,
) -> Phase:
    """The example challenge applied by `host` (default: alice); its `dev` phase."""
    host = host or grant_add_challenge(make_user(username="alice"))
    data = bundle(change)
    path = tmp_path / f"bundle-{hashlib.sha256(data).hexdigest()[:8]}.zip"
    path.write_bytes(data)
    challenge_apply(user=host, bundle_path=path, sha256=hashlib.sha256(data).hexdigest())
    return Phase.objects.select_related("challenge").get(challenge__slug="digits", slug="dev")


def phase_changed(**fields: Any) -> Callable[[dict[str, Any]], None]:
    """A bundle change that sets `fields` on the first phase (and the challenge's `visibility`
    if given as `visibility`)."""

    def change(doc: dict[str, Any]) -> None:
        visibility = fields.pop("visibility", None)
        if visibility is not None:
            doc["visibility"] = visibility
        doc["phases"][0].update(fields)

    return change


def make_team(phase: Phase, name: str, *members: User) -> Team:
    team = Team.objects.create(challenge=phase.challenge, name=name)
    for member in members:
        TeamMember.objects.create(team=team, challenge=phase.challenge, user=member)
    return team


def make_entry(
    phase: Phase,
    team: Team,
    *,
    at: datetime | None = None,
    user: User | None = None,
    status: str = SubmissionStatus.COMPLETED,
    counted: bool = True,
) -> Entry:
    """A phase submission of `team` made at `at` (default: now), completed and counted."""
    owner = user or team.members.select_related("user").first().user  # type: ignore[union-attr]
    submission = Submission.objects.create(owner=owner, status=status)
    if at is not None:
        Submission.objects.filter(pk=submission.pk).update(created_at=at)
    return Entry.objects.create(
        submission=submission, phase=phase, team=team, user=owner, counted=counted
    )


def record(entry: Entry, version: int = 1, **splits: dict[str, float]) -> None:
    """Store the entry's scores as a result's transaction does."""
    entry = Entry.objects.select_related("phase", "submission").get(pk=entry.pk)
    with transaction.atomic():
        entry_scores_record(entry=entry, version=version, splits=splits)


def scored(
    phase: Phase, team: Team, *, minutes: int = 0, version: int = 1, **splits: dict[str, float]
) -> Entry:
    """A completed submission of `team` made `minutes` after T0, with its scores."""
    entry = make_entry(phase, team, at=T0 + timedelta(minutes=minutes))
    record(entry, version, **splits)
    return entry


def baseline_scored(phase: Phase, version: int = 1, **splits: dict[str, float]) -> Baseline:
    baseline = Baseline.objects.filter(phase=phase).first()
    assert baseline is not None, "the example phase names a baseline"
    baseline_scores_record(baseline=baseline, version=version, splits=splits)
    return baseline


def acc(accuracy: float, errors: float = 0.0) -> dict[str, float]:
    return {"accuracy": accuracy, "errors": errors}
