"""Typed errors: every error body of the API becomes an `ApiError` subclass.

The server answers every error with one shape, `{"success": false, "code", "error", ...}`
(validation errors add `fields`); `ApiError` keeps all of it. The subclass is chosen by the
code first (so `quota_exceeded` is a `QuotaError` whatever its status), then by the status.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AmbiguousRequestError",
    "ApiError",
    "AuthenticationError",
    "ConflictError",
    "IdempotencyInProgress",
    "IdempotencyKeyReused",
    "InvalidRequest",
    "NotFound",
    "PermissionDenied",
    "QuotaError",
    "ServerError",
    "TransportError",
    "YoyakuError",
    "error_from_body",
]

#: Codes of refusals that only time or an administrator can lift: never retried, exit code 4.
QUOTA_CODES = frozenset(
    {
        "quota_exceeded",
        "rate_limited",
        "cost_limit_exceeded",
        "storage_quota_exceeded",
        "too_many_lives",
        "too_many_uploads",
        "phase_limit_exceeded",
    }
)


class YoyakuError(Exception):
    """Base of every error this package raises."""


class TransportError(YoyakuError):
    """No answer from the server (refused, reset or closed connection, timeout), after the
    retries the policy allows. `sent` tells whether the request may have reached the server."""

    def __init__(self, message: str, *, method: str, path: str, attempts: int, sent: bool) -> None:
        super().__init__(message)
        self.method = method
        self.path = path
        self.attempts = attempts
        self.sent = sent


class AmbiguousRequestError(TransportError):
    """A request that is not safe to repeat was sent, and its answer was lost: it may or may
    not have taken effect. Check (e.g. list your reservations) before sending it again."""


class ApiError(YoyakuError):
    """An error answer of the API, with every field of its body."""

    def __init__(
        self,
        *,
        status: int,
        code: str,
        error: str,
        fields: dict[str, list[str]] | None = None,
        retry_after: float | None = None,
        body: dict[str, Any] | None = None,
        method: str = "",
        path: str = "",
    ) -> None:
        super().__init__(f"{status} {code}: {error}")
        self.status = status
        self.code = code
        self.error = error
        self.fields: dict[str, list[str]] = fields or {}
        self.retry_after = retry_after
        self.body: dict[str, Any] = body or {}
        self.method = method
        self.path = path

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, code={self.code!r})"

    def to_dict(self) -> dict[str, Any]:
        """The server's error body, plus the HTTP status (what `--json` prints)."""
        return {
            **self.body,
            "success": False,
            "status": self.status,
            "code": self.code,
            "error": self.error,
            **({"fields": self.fields} if self.fields else {}),
            **({"retry_after": self.retry_after} if self.retry_after is not None else {}),
        }


class InvalidRequest(ApiError):
    """400: the request was refused as it is (validation, bad file name, bad extension...)."""


class AuthenticationError(ApiError):
    """401: no token, or a token the server does not know."""


class PermissionDenied(ApiError):
    """403: another user's object, or an operation your account may not do."""


class NotFound(ApiError):
    """404."""


class ConflictError(ApiError):
    """409 (and 406 `too_late`): the object's current state forbids the operation."""


class IdempotencyInProgress(ConflictError):
    """409 `idempotency_request_in_progress`: another request with the same key is running.
    Retried automatically with the same key; raised only when that went on too long."""


class IdempotencyKeyReused(ApiError):
    """422 `idempotency_key_reused`: the key already names a job for another payload."""


class QuotaError(ApiError):
    """A quota, rate, cost or storage limit (429). Never retried: waiting or an administrator
    lifts it."""


class ServerError(ApiError):
    """5xx, after the retries the policy allows."""


_BY_CODE: dict[str, type[ApiError]] = {
    "idempotency_request_in_progress": IdempotencyInProgress,
    "idempotency_key_reused": IdempotencyKeyReused,
    **dict.fromkeys(QUOTA_CODES, QuotaError),
}

_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequest,
    401: AuthenticationError,
    403: PermissionDenied,
    404: NotFound,
    406: ConflictError,
    409: ConflictError,
    422: IdempotencyKeyReused,
    429: QuotaError,
}


def _retry_after(header: str | None, body: dict[str, Any]) -> float | None:
    for value in (body.get("retry_after"), header):
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except (TypeError, ValueError, OverflowError):  # an integer past a float's range
            continue
    return None


def error_from_body(
    status: int,
    body: Any,
    *,
    retry_after_header: str | None = None,
    method: str = "",
    path: str = "",
    text: str = "",
) -> ApiError:
    """The typed error for an error answer. A body that is not the API's JSON shape (a proxy's
    HTML page, say) still gives an error, with the code `http_<status>`."""
    data: dict[str, Any] = body if isinstance(body, dict) else {}
    code = str(data.get("code") or f"http_{status}")
    message = str(data.get("error") or text.strip()[:200] or f"HTTP {status}")
    raw_fields = data.get("fields")
    fields: dict[str, list[str]] = {}
    if isinstance(raw_fields, dict):
        for name, messages in raw_fields.items():
            if isinstance(messages, list):
                fields[str(name)] = [str(m) for m in messages]
            else:
                fields[str(name)] = [str(messages)]
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else ApiError
    return cls(
        status=status,
        code=code,
        error=message,
        fields=fields,
        retry_after=_retry_after(retry_after_header, data),
        body=data,
        method=method,
        path=path,
    )
