"""What a participant reads of their team in a phase (SPEC §11.4): the limits' use and the
team's submissions with the scores they may see (a hidden split only after the reveal, or
for hosts and staff), `counted` and `refund_reason`. Never the scorer's logs."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from apps.benchmarks.board_selectors import board_access
from apps.benchmarks.models import Entry, Phase, Score, Split, Team, TeamMember
from apps.benchmarks.services.phase_limits import LimitUse, phase_limits_usage
from apps.core.exceptions import NotFound


@dataclass(frozen=True)
class TeamEntry:
    entry: Entry
    scores: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class PhaseMine:
    phase: Phase
    team: Team
    limits: dict[str, LimitUse]
    submissions: list[TeamEntry]


def phase_mine(*, user: AbstractBaseUser, slug: str, phase_slug: str) -> PhaseMine:
    """The caller's team in the phase (NotFound when they have none in the challenge, or the
    phase is unknown; the challenge's 404 when they may not see it)."""
    access = board_access(slug=slug, phase_slug=phase_slug, user=user)
    member = (
        TeamMember.objects.select_related("team")
        .filter(challenge=access.challenge, user_id=user.pk)
        .first()
    )
    if member is None:
        raise NotFound("You are not in a team of this challenge.")
    phase = access.phase
    team = member.team
    # Allowed by name: a split the phase no longer names (a bundle dropped or renamed it, and
    # its scores stay in the version) is as hidden as it was.
    public = set(Split.objects.filter(phase=phase, hidden=False).values_list("name", flat=True))
    visible_hidden = phase.revealed_at is not None or access.manage
    entries = list(
        Entry.objects.filter(phase=phase, team=team)
        .select_related("submission", "user")
        .order_by("-created_at", "-submission_id")
    )
    scores: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    rows = Score.objects.filter(
        entry_id__in=[e.pk for e in entries], version=phase.scoring_version
    ).values_list("entry_id", "split", "values")
    for entry_id, split, values in rows:
        if split not in public and not visible_hidden:
            continue
        scores[entry_id][split] = dict(values)
    return PhaseMine(
        phase=phase,
        team=team,
        limits=phase_limits_usage(team_id=team.pk, phase=phase, now=timezone.now()),
        submissions=[TeamEntry(entry=e, scores=scores.get(e.pk, {})) for e in entries],
    )
