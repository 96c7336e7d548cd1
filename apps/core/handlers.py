"""The one exception handler: every API error leaves in the SPEC's body.

`{"success": false, "code": "<machine_code>", "error": "<human message>", ...details}`.
Domain errors are turned into DRF exceptions first, so DRF's own handler still sets headers
(`Retry-After`, `WWW-Authenticate`) and rolls back the request's atomic block.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.db import InterfaceError, OperationalError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler, set_rollback

from apps.core.exceptions import DomainError

logger = logging.getLogger(__name__)

# DRF's default codes, renamed where the SPEC names a code of its own.
CODE_ALIASES = {
    "invalid": "invalid_request",
    "parse_error": "invalid_request",
    "throttled": "rate_limited",
}


class DomainAPIException(exceptions.APIException):
    def __init__(self, error: DomainError) -> None:
        self.status_code = int(error.http_status)
        self.domain_error = error
        super().__init__(detail=error.message, code=error.code)


def _flatten(detail: Any) -> list[str]:
    if isinstance(detail, Mapping):
        return [msg for value in detail.values() for msg in _flatten(value)]
    if isinstance(detail, list | tuple):
        return [msg for item in detail for msg in _flatten(item)]
    return [str(detail)]


def _messages(detail: Any) -> Any:
    """A field's errors as JSON: a list of messages, or, for a nested serializer, an object of
    its fields (a list of such objects for `many=True`, `{}` where an item is valid)."""
    if isinstance(detail, Mapping):
        return {str(name): _messages(value) for name, value in detail.items()}
    if isinstance(detail, list | tuple):
        if any(isinstance(item, Mapping | list | tuple) for item in detail):
            return [_messages(item) for item in detail]
        return [str(item) for item in detail]
    return [str(detail)]


def validation_fields(detail: Any) -> dict[str, Any]:
    """The SPEC's `fields` of a validation error: `{"name": ["message", ...]}`, nested the way
    the input is (`{"birth": {"method": ["..."]}}`), never a Python repr."""
    if isinstance(detail, Mapping):
        return {str(name): _messages(value) for name, value in detail.items()}
    return {"non_field_errors": [str(msg) for msg in _flatten(detail)]}


def _first_errors(fields: Mapping[str, Any], prefix: str = "") -> list[str]:
    found: list[str] = []
    for name, value in fields.items():
        nested = f"{prefix}.{name}" if prefix else name
        path = prefix if name == "non_field_errors" else nested
        if isinstance(value, Mapping):
            found.extend(_first_errors(value, path))
        elif value and all(isinstance(item, str) for item in value):
            found.append(f"{path}: {value[0]}" if path else value[0])
        else:
            for index, item in enumerate(value):
                if isinstance(item, Mapping):
                    found.extend(_first_errors(item, f"{path}[{index}]"))
    return found


def validation_message(fields: Mapping[str, Any]) -> str:
    """One line for `error`: the first message of each failing field, with its path."""
    return "; ".join(_first_errors(fields)) or "Invalid request."


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"success": False, "code": code, "error": message, **extra}


# The database cannot be reached (restarting, failing over, out of connections) or dropped the
# connection: the request's open transaction is rolled back and the outage is temporary, so
# 503 (retry shortly), never 500.
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)
DATABASE_RETRY_AFTER = "1"


def database_unavailable_body() -> dict[str, Any]:
    return error_body("service_unavailable", "The database is unavailable; retry in a moment.")


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DATABASE_UNAVAILABLE):
        logger.warning("Database unavailable in %s: %s", context.get("view"), exc)
        set_rollback()
        return Response(
            database_unavailable_body(),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": DATABASE_RETRY_AFTER},
        )
    if isinstance(exc, DomainError):
        exc = DomainAPIException(exc)
    elif isinstance(exc, RequestDataTooBig):
        exc = exceptions.ValidationError({"non_field_errors": [str(exc)]})
    elif isinstance(exc, SuspiciousOperation):
        exc = exceptions.ValidationError({"non_field_errors": [str(exc) or "Suspicious request."]})

    response = exception_handler(exc, context)
    if response is None:
        # Not an API exception: log it with its stack, answer JSON, never an HTML page.
        logger.exception("Unhandled error in %s", context.get("view"), exc_info=exc)
        set_rollback()
        return Response(
            error_body("internal_error", "Internal server error."),
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )

    if isinstance(exc, DomainAPIException):
        error = exc.domain_error
        response.data = error_body(error.code, error.message, **error.extra)
        for name, value in error.headers.items():
            response[name] = value
        return response

    if isinstance(exc, exceptions.ValidationError):
        fields = validation_fields(exc.detail)
        response.data = error_body("invalid_request", validation_message(fields), fields=fields)
        return response

    if isinstance(exc, Http404):
        response.data = error_body("not_found", "Not found.")
        return response
    if isinstance(exc, DjangoPermissionDenied):
        response.data = error_body("permission_denied", "You do not have permission.")
        return response

    assert isinstance(exc, exceptions.APIException)  # noqa: S101 - DRF only handles these
    codes = exc.get_codes()
    code = codes if isinstance(codes, str) else exc.default_code
    code = CODE_ALIASES.get(str(code), str(code))
    message = " ".join(_flatten(exc.detail))
    extra: dict[str, Any] = {}
    wait = getattr(exc, "wait", None)
    if isinstance(exc, exceptions.Throttled) and wait is not None:
        extra["retry_after"] = int(wait)
    response.data = error_body(code, message, **extra)
    return response


def status_code_name(status_code: int) -> str:
    """A machine code for a bare HTTP status (used where no exception carried one)."""
    return {
        HTTPStatus.BAD_REQUEST: "invalid_request",
        HTTPStatus.UNAUTHORIZED: "not_authenticated",
        HTTPStatus.FORBIDDEN: "permission_denied",
        HTTPStatus.NOT_FOUND: "not_found",
        HTTPStatus.METHOD_NOT_ALLOWED: "method_not_allowed",
        HTTPStatus.REQUEST_ENTITY_TOO_LARGE: "request_too_large",
        HTTPStatus.UNSUPPORTED_MEDIA_TYPE: "unsupported_media_type",
        HTTPStatus.TOO_MANY_REQUESTS: "rate_limited",
        HTTPStatus.REQUEST_URI_TOO_LONG: "uri_too_long",
        HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE: "request_header_fields_too_large",
    }.get(HTTPStatus(status_code), "internal_error" if status_code >= 500 else "error")
