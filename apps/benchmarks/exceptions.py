"""Refusals of the benchmarks app (SPEC §11.1, §11.3)."""

from __future__ import annotations

from http import HTTPStatus

from apps.core.exceptions import DomainError, InvalidRequest


class InvalidBundle(InvalidRequest):
    """A bundle that breaks a rule; `fields` is keyed by the YAML path of each problem."""

    code = "invalid_bundle"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "The bundle is invalid."


class UnsafeBundle(DomainError):
    code = "unsafe_archive"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "The bundle holds a member that is not a plain file or folder inside it."


class ChallengeNotFound(DomainError):
    code = "not_found"
    http_status = HTTPStatus.NOT_FOUND
    default_message = "No such challenge."


class NotParticipant(DomainError):
    """A phase submission by someone who is not an approved participant (SPEC §11.2)."""

    code = "not_participant"
    http_status = HTTPStatus.FORBIDDEN
    default_message = "You are not an approved participant of this challenge."


class PhaseClosed(DomainError):
    """A phase submission outside the phase's `[start, end)`, at creation or at enqueue."""

    code = "phase_closed"
    http_status = HTTPStatus.CONFLICT
    default_message = "This phase does not accept submissions now."


class NotRevealed(DomainError):
    """A hidden split's leaderboard before the phase's reveal (hosts and staff excepted)."""

    code = "not_revealed"
    http_status = HTTPStatus.FORBIDDEN
    default_message = "This split stays hidden until the phase's reveal."


class TooManyFinals(DomainError):
    """More finals than the phase's `final_selection`; `extra` has `allowed` and `selected`."""

    code = "too_many_finals"
    http_status = HTTPStatus.CONFLICT
    default_message = "Your team has already selected as many finals as the phase allows."


class FinalsFrozen(DomainError):
    code = "finals_frozen"
    http_status = HTTPStatus.CONFLICT
    default_message = "The phase's hidden splits are revealed: finals no longer change."


class LeaderboardLoginRequired(DomainError):
    """An anonymous caller asking for a leaderboard that is not public (the same answer for a
    private challenge and an unknown one, so nothing is told about either)."""

    code = "not_authenticated"
    http_status = HTTPStatus.UNAUTHORIZED
    default_message = "Authentication credentials were not provided."


class RevealNotDue(DomainError):
    """The phase's reservation called before the phase's reveal time (a call already running
    when a bundle moved the time); the moved reservation reveals at the new time."""

    code = "reveal_not_due"
    http_status = HTTPStatus.CONFLICT
    default_message = "This phase's reveal time has not come."


class RescoreNotRunning(DomainError):
    """Cancelling when the phase has no rescore running (none, switched, or cancelled)."""

    code = "rescore_not_running"
    http_status = HTTPStatus.CONFLICT
    default_message = "This phase has no rescore running."
