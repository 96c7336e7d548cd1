"""Job submission refusals (SPEC §3)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from apps.core.exceptions import DomainError

# A client that sent a bad key is pointed at the documentation (the IETF Idempotency-Key
# draft's advice for its 400 and 422 answers).
DESCRIBED_BY = {"Link": '</api/docs/>; rel="describedby"'}


class DescribedIdempotencyError(DomainError):
    """A refused idempotency key: the answer carries `Link: </api/docs/>; rel="describedby"`."""

    def __init__(
        self,
        message: str | None = None,
        *,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message, extra=extra, headers={**DESCRIBED_BY, **(headers or {})})


class InvalidIdempotencyKey(DescribedIdempotencyError):
    code = "invalid_idempotency_key"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = (
        "An idempotency key is 1-256 printable ASCII characters without whitespace or commas, "
        "sent once (one Idempotency-Key header line)."
    )


class IdempotencyKeyMismatch(DescribedIdempotencyError):
    code = "idempotency_key_mismatch"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "The Idempotency-Key header and the body's idempotency_key differ."


class IdempotencyKeyReused(DescribedIdempotencyError):
    code = "idempotency_key_reused"
    http_status = HTTPStatus.UNPROCESSABLE_ENTITY
    default_message = "This idempotency key was already used with a different request payload."


class IdempotencyRequestInProgress(DomainError):
    """Another request holds the key; `Retry-After` (and `retry_after`) say when to retry."""

    code = "idempotency_request_in_progress"
    http_status = HTTPStatus.CONFLICT
    default_message = "A request with this idempotency key is still in progress; retry it shortly."

    def __init__(self, message: str | None = None, *, retry_after: int = 1) -> None:
        seconds = max(1, int(retry_after))
        super().__init__(
            message,
            extra={"retry_after": seconds},
            headers={"Retry-After": str(seconds)},
        )


class MissingFiles(DomainError):
    code = "missing_files"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "Required files are missing."


class DuplicateInFlight(DomainError):
    code = "duplicate_in_flight"
    http_status = HTTPStatus.CONFLICT
    default_message = "A submission for this question and skill is already pending or processing."
