"""Domain errors: what services raise, and what the API renders as the SPEC's error body."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any


class DomainError(Exception):
    """A refusal with a machine code, an HTTP status and a human message.

    Services raise subclasses; they never import DRF. The API's exception handler renders
    `{"success": false, "code": code, "error": message, **extra}` with `http_status`, plus
    `headers` (e.g. `Retry-After`).
    """

    code: str = "error"
    http_status: int = HTTPStatus.BAD_REQUEST
    default_message: str = "The request could not be completed."

    def __init__(
        self,
        message: str | None = None,
        *,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.message = message or self.default_message
        self.extra: dict[str, Any] = extra or {}
        self.headers: dict[str, str] = headers or {}
        super().__init__(self.message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class InvalidRequest(DomainError):
    """Input that fails validation; `fields` maps a field name to its messages (or, for a
    nested object, to that object's fields)."""

    code = "invalid_request"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "The request is invalid."

    def __init__(
        self,
        message: str | None = None,
        *,
        fields: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        merged = dict(extra or {})
        if fields is not None:
            merged["fields"] = fields
        super().__init__(message, extra=merged)


class NotFound(DomainError):
    code = "not_found"
    http_status = HTTPStatus.NOT_FOUND
    default_message = "Not found."


class PermissionDenied(DomainError):
    code = "permission_denied"
    http_status = HTTPStatus.FORBIDDEN
    default_message = "You do not have permission to perform this action."


class InvalidTransition(DomainError):
    code = "invalid_transition"
    http_status = HTTPStatus.CONFLICT
    default_message = "This state change is not allowed."


class DemoAccountsDisabled(DomainError):
    """Demo accounts (known passwords, a superuser) exist only for development (`DEBUG` on)."""

    code = "demo_accounts_disabled"
    http_status = HTTPStatus.CONFLICT
    default_message = (
        "Demo accounts are created only with DEBUG on: they have a published password and one "
        "of them is a superuser. In production run `manage.py bootstrap --no-accounts`."
    )


class TokenInvalid(DomainError):
    """A token that is unknown, revoked or expired (the API answers 401)."""

    code = "authentication_failed"
    http_status = HTTPStatus.UNAUTHORIZED
    default_message = "Invalid token."


class InsufficientScope(DomainError):
    """A token-authenticated request outside the token's scopes (SPEC §11.8)."""

    code = "insufficient_scope"
    http_status = HTTPStatus.FORBIDDEN
    default_message = "This token's scopes do not allow this request."


class LoginLockedOut(DomainError):
    """Too many failed password logins for this username from this address (django-axes)."""

    code = "login_locked_out"
    http_status = HTTPStatus.TOO_MANY_REQUESTS
    default_message = "Too many failed logins for this username from your address."
