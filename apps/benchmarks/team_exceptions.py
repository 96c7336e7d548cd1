"""Refusals of teams and phase limits (SPEC §11.4)."""

from __future__ import annotations

from http import HTTPStatus

from apps.core.exceptions import DomainError


class AlreadyInTeam(DomainError):
    code = "already_in_team"
    http_status = HTTPStatus.CONFLICT
    default_message = "You are already in a team of this challenge: leave it first."


class TeamFull(DomainError):
    code = "team_full"
    http_status = HTTPStatus.CONFLICT
    default_message = "This team has as many members as the challenge allows."


class TeamNameTaken(DomainError):
    code = "team_name_taken"
    http_status = HTTPStatus.CONFLICT
    default_message = "A team of this challenge already has this name."


class TeamLocked(DomainError):
    """Leaving a team with a counted submission, or joining another while one's team has
    one: used submissions never move to a fresher team."""

    code = "team_locked"
    http_status = HTTPStatus.CONFLICT
    default_message = "Your team has a counted submission in this challenge."


class PhaseLimitExceeded(DomainError):
    """`extra`: `limit` (per_day | total | concurrent), `used`, `allowed`, and for per_day
    `resets_at` (with a `Retry-After` header)."""

    code = "phase_limit_exceeded"
    http_status = HTTPStatus.TOO_MANY_REQUESTS
    default_message = "Your team has reached this phase's limit."
