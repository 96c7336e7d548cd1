"""Job submission refusals (SPEC §3)."""

from __future__ import annotations

from http import HTTPStatus

from apps.core.exceptions import DomainError


class InvalidIdempotencyKey(DomainError):
    code = "invalid_idempotency_key"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "An idempotency key is 1-256 printable ASCII characters without whitespace."


class IdempotencyKeyMismatch(DomainError):
    code = "idempotency_key_mismatch"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "The Idempotency-Key header and the body's idempotency_key differ."


class IdempotencyKeyReused(DomainError):
    code = "idempotency_key_reused"
    http_status = HTTPStatus.UNPROCESSABLE_ENTITY
    default_message = "This idempotency key was already used with a different request payload."


class IdempotencyRequestInProgress(DomainError):
    code = "idempotency_request_in_progress"
    http_status = HTTPStatus.CONFLICT
    default_message = "A request with this idempotency key is still in progress; retry it shortly."


class MissingFiles(DomainError):
    code = "missing_files"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "Required files are missing."


class DuplicateInFlight(DomainError):
    code = "duplicate_in_flight"
    http_status = HTTPStatus.CONFLICT
    default_message = "A submission for this question and skill is already pending or processing."
