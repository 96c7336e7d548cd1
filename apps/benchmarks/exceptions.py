"""Refusals of the benchmarks app (SPEC §11.1)."""

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


class RevealNotDue(DomainError):
    """The phase's reservation called before the phase's reveal time (a call already running
    when a bundle moved the time); the moved reservation reveals at the new time."""

    code = "reveal_not_due"
    http_status = HTTPStatus.CONFLICT
    default_message = "This phase's reveal time has not come."
