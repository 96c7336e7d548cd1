"""The API's one error body for what the web server answers itself, before Django sees the
request: a head it cannot parse or past its limits, a body too slow or too large, an upload
without credentials, a full spool budget."""

from __future__ import annotations

import json

CODES = {
    400: "invalid_request",
    401: "not_authenticated",
    403: "permission_denied",
    408: "request_timeout",
    413: "request_too_large",
    414: "uri_too_long",
    417: "expectation_failed",
    431: "request_header_fields_too_large",
    500: "internal_error",
    501: "not_implemented",
    503: "service_unavailable",
}


def error_body(status: int, message: str, **extra: object) -> bytes:
    """`{"success": false, "code", "error", **extra}` as JSON bytes."""
    return json.dumps(
        {"success": False, "code": CODES.get(status, "invalid_request"), "error": message, **extra}
    ).encode()


def error_response(status: int, reason: str, message: str, **extra: object) -> bytes:
    """A whole HTTP/1.1 response carrying `error_body`, closing the connection."""
    body = error_body(status, message or reason, **extra)
    head = (
        f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body
