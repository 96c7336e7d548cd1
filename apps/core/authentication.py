"""Token authentication accepting both `Bearer <token>` and `Token <token>`."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.request import Request


class BearerOrTokenAuthentication(TokenAuthentication):
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
        if "\x00" in token:
            # PostgreSQL refuses NUL in a lookup (a 500); no token holds one.
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        return self.authenticate_credentials(token)
