"""Teams of a challenge (SPEC §11.4): create, join by invite code, leave, and one's own.

Only approved participants take part in teams. A user is in at most one team per challenge
(the unique (challenge, user) constraint of `TeamMember`: AlreadyInTeam); a team has at most
`max_team_size` members, counted with the team row locked, so concurrent joins never
overshoot (TeamFull); names are unique per challenge, folded (TeamNameTaken).

A team is locked while it has a counted entry in the challenge: nobody leaves it, and nobody
in it joins another (TeamLocked); "counted" is read at the request, under the team's lock,
so a refund unlocks. Joining one team while in another is AlreadyInTeam (leave first).
A team left empty is deleted unless it has entries (they stay on the leaderboard).

Locks: the team row (`select_for_update`), the one row the phase admission locks first
(`apps.benchmarks.services.phase_limits`), so a leave and an enqueue of one team serialize.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from apps.benchmarks.exceptions import NotParticipant
from apps.benchmarks.models import Challenge, Entry, ParticipantStatus, Team, TeamMember
from apps.benchmarks.selectors import challenge_get_seen, participant_get
from apps.benchmarks.team_exceptions import AlreadyInTeam, TeamFull, TeamLocked, TeamNameTaken
from apps.core.exceptions import InvalidRequest, NotFound
from apps.core.validation import text_display_problem
from apps.submissions.models import filename_fold


@dataclass(frozen=True)
class TeamView:
    """A team as its members see it."""

    team: Team
    members: list[TeamMember]


def _participant_challenge(*, user: AbstractBaseUser, slug: str) -> Challenge:
    challenge = challenge_get_seen(slug=slug, user=user)
    participant = participant_get(challenge=challenge, user_id=int(user.pk))
    if participant is None or participant.status != ParticipantStatus.APPROVED:
        raise NotParticipant(
            f"Only approved participants of '{challenge.slug}' take part in its teams.",
            extra={"status": participant.status if participant is not None else None},
        )
    return challenge


def team_has_counted(*, team_id: str) -> bool:
    return Entry.objects.filter(team_id=team_id, counted=True).exists()


def _locked_error(team: Team) -> TeamLocked:
    return TeamLocked(
        f"Team '{team.name}' has a counted submission in this challenge: its members stay.",
        extra={"team": {"id": team.pk, "name": team.name}},
    )


def _view(team: Team) -> TeamView:
    members = list(TeamMember.objects.filter(team=team).select_related("user"))
    return TeamView(team=team, members=members)


def _team_lock(team_id: str) -> Team | None:
    return Team.objects.select_for_update(of=("self",)).filter(pk=team_id).first()


def _current_member(challenge: Challenge, user: AbstractBaseUser) -> TeamMember | None:
    return (
        TeamMember.objects.select_related("team")
        .filter(challenge=challenge, user_id=user.pk)
        .first()
    )


def _refuse_if_in_team(member: TeamMember | None, *, joining: Team | None = None) -> None:
    if member is None:
        return
    if (
        joining is not None
        and member.team_id != joining.pk
        and team_has_counted(team_id=member.team_id)
    ):
        raise _locked_error(member.team)
    raise AlreadyInTeam(
        f"You are already in team '{member.team.name}' of this challenge"
        + ("." if joining is not None and member.team_id == joining.pk else ": leave it first."),
        extra={"team": {"id": member.team_id, "name": member.team.name}},
    )


def team_create(*, user: AbstractBaseUser, slug: str, name: str) -> TeamView:
    """A new team named `name` with the caller as its only member. NotParticipant,
    AlreadyInTeam (also from the membership constraint under a race), TeamNameTaken (folded
    names, from the unique constraint)."""
    challenge = _participant_challenge(user=user, slug=slug)
    name = name.strip()
    if not name:
        raise InvalidRequest("name: This field may not be blank.", fields={"name": ["Required."]})
    shown = text_display_problem(name)
    if shown is not None:
        # Every participant reads the name on the leaderboard: no reordered or invisible text.
        raise InvalidRequest(f"name: contains {shown}.", fields={"name": [f"Contains {shown}."]})
    _refuse_if_in_team(_current_member(challenge, user))
    try:
        with transaction.atomic():
            team = Team.objects.create(challenge=challenge, name=name)
            TeamMember.objects.create(team=team, challenge=challenge, user_id=user.pk)
    except IntegrityError as exc:
        folded = filename_fold(name)
        if Team.objects.filter(challenge=challenge, name_folded=folded).exists():
            raise TeamNameTaken(
                f"A team of this challenge is already named '{name}' (compared "
                "case-insensitively).",
                extra={"name": name},
            ) from exc
        _refuse_if_in_team(_current_member(challenge, user))
        raise
    return _view(team)


def team_join(*, user: AbstractBaseUser, slug: str, invite_code: str) -> TeamView:
    """Join the challenge's team with `invite_code` (NotFound otherwise). Locks the team row,
    then counts its members: TeamFull at `max_team_size`, under any concurrency. TeamLocked
    when the caller's current team has a counted entry, AlreadyInTeam when they are in a team
    (this one, or another without counted entries: leave it first)."""
    challenge = _participant_challenge(user=user, slug=slug)
    with transaction.atomic():
        found = Team.objects.filter(challenge=challenge, invite_code=invite_code).first()
        team = _team_lock(found.pk) if found is not None else None
        if team is None:
            raise NotFound("No team of this challenge has this invite code.")
        _refuse_if_in_team(_current_member(challenge, user), joining=team)
        members = TeamMember.objects.filter(team=team).count()
        if members >= challenge.max_team_size:
            raise TeamFull(
                f"Team '{team.name}' already has {members} members "
                f"(at most {challenge.max_team_size}).",
                extra={"max_team_size": challenge.max_team_size, "members": members},
            )
        try:
            with transaction.atomic():
                TeamMember.objects.create(team=team, challenge=challenge, user_id=user.pk)
        except IntegrityError as exc:
            raise AlreadyInTeam() from exc
    return _view(team)


def team_leave(*, user: AbstractBaseUser, slug: str, team_id: str) -> None:
    """Leave the team (NotFound unless the caller is a member). TeamLocked while the team has
    a counted entry in the challenge (read with the team row locked). The team, left empty
    and without entries, is deleted."""
    challenge = _participant_challenge(user=user, slug=slug)
    with transaction.atomic():
        team = _team_lock(team_id)
        if team is None or team.challenge_id != challenge.pk:
            raise NotFound("No such team.")
        member = TeamMember.objects.filter(team=team, user_id=user.pk).first()
        if member is None:
            raise NotFound("You are not a member of this team.")
        if team_has_counted(team_id=team.pk):
            raise _locked_error(team)
        member.delete()
        if (
            not TeamMember.objects.filter(team=team).exists()
            and not Entry.objects.filter(team=team).exists()
        ):
            team.delete()


def team_mine(*, user: AbstractBaseUser, slug: str) -> TeamView:
    """The caller's team in the challenge (NotFound when they have none)."""
    challenge = challenge_get_seen(slug=slug, user=user)
    member = _current_member(challenge, user)
    if member is None:
        raise NotFound("You are not in a team of this challenge.")
    return _view(member.team)
