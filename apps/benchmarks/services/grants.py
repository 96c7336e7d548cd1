"""Hosts grant a team extra submissions in a phase (SPEC §11.4), with who, when and why."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.utils import timezone

from apps.benchmarks.models import Challenge, GrantLimit, Phase, Team, TeamGrant
from apps.benchmarks.selectors import challenge_get_seen, challenge_may_manage
from apps.benchmarks.services.phase_limits import utc_day_start
from apps.core.exceptions import InvalidRequest, NotFound, PermissionDenied


def _hosted_team(*, user: AbstractBaseUser, slug: str, team_id: str) -> tuple[Challenge, Team]:
    challenge = challenge_get_seen(slug=slug, user=user)
    if not challenge_may_manage(challenge=challenge, user=user):
        raise PermissionDenied("Only the challenge's hosts (and staff) grant submissions.")
    team = Team.objects.filter(challenge=challenge, pk=team_id).first()
    if team is None:
        raise NotFound("No such team.")
    return challenge, team


def team_grant_create(
    *,
    user: AbstractBaseUser,
    slug: str,
    team_id: str,
    phase: str,
    limit: str,
    extra: int,
    reason: str,
) -> TeamGrant:
    """`extra` more submissions on the phase's `limit` (per_day: for the current UTC day
    only) for the team. PermissionDenied unless a host or staff; NotFound for an unknown team;
    InvalidRequest for a phase the challenge does not have. The next enqueue's `allowed`
    includes it (a grant adds; it never takes back)."""
    challenge, team = _hosted_team(user=user, slug=slug, team_id=team_id)
    phase_row = Phase.objects.filter(challenge=challenge, slug=phase).first()
    if phase_row is None:
        raise InvalidRequest(
            f"phase: the challenge has no phase '{phase}'.",
            fields={"phase": [f"No phase '{phase}' in this challenge."]},
        )
    now = timezone.now()
    return TeamGrant.objects.create(
        team=team,
        phase=phase_row,
        limit=limit,
        extra=extra,
        day=utc_day_start(now).date() if limit == GrantLimit.PER_DAY else None,
        reason=reason,
        granted_by_id=user.pk,
    )


def team_grant_list(*, user: AbstractBaseUser, slug: str, team_id: str) -> QuerySet[TeamGrant]:
    """The team's grants, oldest first (hosts and staff only: PermissionDenied)."""
    _challenge, team = _hosted_team(user=user, slug=slug, team_id=team_id)
    return TeamGrant.objects.filter(team=team).select_related("phase", "granted_by")
