"""API authentication: hashed, scoped tokens (`Bearer <token>` or `Token <token>`), and a
password only where a token is made.

A token authenticates as its user with the `ApiToken` row as `request.auth`; the API base
(`apps.core.api.base.ApiView`) then checks the view's scope against the token's scopes. The
password scheme (HTTP Basic) is accepted by `POST /api/tokens/` alone, so a client can turn a
username and password into a token (`yoyaku login --username`); it goes through Django's
`authenticate()`, so django-axes counts its failures and locks out like a login form.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from django.contrib.auth import authenticate
from django.utils.translation import gettext_lazy as _
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from apps.core.exceptions import LoginLockedOut, TokenInvalid
from apps.core.services import token_authenticate


class BearerOrTokenAuthentication(BaseAuthentication):
    keywords = ("bearer", "token")
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        auth = get_authorization_header(request).split()
        if not auth or auth[0].lower().decode(errors="replace") not in self.keywords:
            return None
        if len(auth) != 2:
            raise exceptions.AuthenticationFailed(
                _("Invalid token header. Expected 'Bearer <token>' or 'Token <token>'.")
            )
        try:
            token = auth[1].decode()
        except UnicodeError as exc:
            raise exceptions.AuthenticationFailed(
                _("Invalid token header. Token string should not contain invalid characters.")
            ) from exc
        # A token with NUL or any other unprintable character is refused before any lookup.
        try:
            api_token = token_authenticate(token=token)
        except TokenInvalid as exc:
            raise exceptions.AuthenticationFailed(exc.message) from exc
        return api_token.user, api_token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class PasswordAuthentication(BaseAuthentication):
    """HTTP Basic with the account's password, through `authenticate()` (django-axes)."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        auth = get_authorization_header(request).split()
        if not auth or auth[0].lower() != b"basic":
            return None
        if request.method != "POST":
            # A password only makes a token; listing or revoking tokens takes a token or a
            # session, like every other request.
            return None
        if len(auth) != 2:
            raise exceptions.AuthenticationFailed(_("Invalid basic header."))
        try:
            username, sep, password = (
                base64.b64decode(auth[1], validate=True).decode().partition(":")
            )
        except (binascii.Error, UnicodeError) as exc:
            raise exceptions.AuthenticationFailed(_("Invalid basic header.")) from exc
        if not sep or "\x00" in username or "\x00" in password:
            raise exceptions.AuthenticationFailed(_("Invalid basic header."))
        django_request = request._request
        user = authenticate(django_request, username=username, password=password)
        if getattr(django_request, "axes_locked_out", False):
            # Imported here: the lock-out module renders through the exception handler, which
            # imports DRF's views, which import this module (the authentication setting).
            from apps.core.lockout import lockout_retry_after

            retry_after = lockout_retry_after()
            raise LoginLockedOut(
                "Too many failed logins for this username from your address; "
                f"try again in {retry_after} seconds.",
                extra={"retry_after": retry_after},
                headers={"Retry-After": str(retry_after)},
            )
        if user is None or not user.is_active:
            raise exceptions.AuthenticationFailed(_("Invalid username/password."))
        return user, None

    def authenticate_header(self, request: Request) -> str:
        return 'Basic realm="api"'


class BearerOrTokenAuthenticationScheme(OpenApiAuthenticationExtension):
    """Documents the token scheme in the OpenAPI schema."""

    target_class = "apps.core.authentication.BearerOrTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token (`Authorization: Bearer <token>`; `Token <token>` "
            "works too). Tokens carry scopes: outside them → 403 `insufficient_scope`.",
        }


class PasswordAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "apps.core.authentication.PasswordAuthentication"
    name = "passwordAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "basic",
            "description": "Username and password, only to create a token (POST /api/tokens/).",
        }
