"""Errors of grading and review."""

from __future__ import annotations

from http import HTTPStatus

from apps.core.exceptions import DomainError, PermissionDenied
from apps.core.permissions import NotReviewer as NotReviewer


class StaffOnly(PermissionDenied):
    default_message = "Only staff may do this."


class AlreadyClaimed(DomainError):
    """Another reviewer holds a live claim; `extra` has `claimed_by` and `claim_expires_at`."""

    code = "already_claimed"
    http_status = HTTPStatus.CONFLICT
    default_message = "Another reviewer has claimed this submission."


class NotClaimHolder(DomainError):
    code = "not_claim_holder"
    http_status = HTTPStatus.CONFLICT
    default_message = "You do not hold a live claim on this submission."


class RegradeConflict(DomainError):
    """The owner already has a pending/processing submission for the same question and skill."""

    code = "submission_in_flight"
    http_status = HTTPStatus.CONFLICT
    default_message = "The owner already has a submission in flight for this question."


class OwnSubmission(DomainError):
    """A reviewer (or staff through the API) acting on a submission they own (SPEC §10)."""

    code = "own_submission"
    http_status = HTTPStatus.CONFLICT
    default_message = (
        "You cannot review or regrade your own submission; another reviewer must (staff can "
        "override in the admin)."
    )
