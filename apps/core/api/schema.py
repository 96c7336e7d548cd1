"""OpenAPI helpers: document error responses with the one error body."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse

from apps.core.api.serializers import ErrorSerializer

_DESCRIPTIONS = {
    400: "Invalid request (`invalid_request` with `fields`, or a more specific code).",
    401: "Not authenticated (`not_authenticated`, `authentication_failed`).",
    403: "Another user's object, or not allowed (`permission_denied`).",
    404: "Not found (`not_found`).",
    406: "Too late (`too_late`).",
    409: "Conflict with the object's current state.",
    413: "Request too large.",
    415: "Unsupported media type.",
    422: "Unprocessable (e.g. `idempotency_key_reused`).",
    429: "Limit reached (`quota_exceeded`, `rate_limited`, `cost_limit_exceeded`).",
}


def error_responses(*statuses: int, **descriptions: str) -> dict[int, Any]:
    """`{status: OpenApiResponse(ErrorSerializer)}` for `@extend_schema(responses=...)`.

    401 is always included. `descriptions` override by `_<status>`: `_409="... codes ..."`.
    """
    result: dict[int, Any] = {}
    for status in sorted({401, *statuses}):
        text = descriptions.get(f"_{status}", _DESCRIPTIONS.get(status, "Error."))
        result[status] = OpenApiResponse(ErrorSerializer, description=text)
    return result
