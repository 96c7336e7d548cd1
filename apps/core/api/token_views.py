"""`/api/tokens/`: the caller's API tokens — create (the secret shown once), list, revoke.

A browser session, a password (HTTP Basic, here only: `yoyaku login --username`) or a token
may manage tokens. A token may create tokens with its own scopes at most and no later expiry
than its own, list them (`read`) and revoke them (`submit`).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.authentication import SessionAuthentication
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.base import ApiView
from apps.core.api.schema import error_responses
from apps.core.api.serializers import (
    TokenCreatedSerializer,
    TokenCreateInputSerializer,
    TokenOutputSerializer,
)
from apps.core.authentication import BearerOrTokenAuthentication, PasswordAuthentication
from apps.core.selectors import token_list
from apps.core.services import token_create, token_revoke


class TokenListCreateApi(ApiView):
    authentication_classes: list[Any] = [
        BearerOrTokenAuthentication,
        SessionAuthentication,
        PasswordAuthentication,
    ]

    @extend_schema(
        operation_id="tokens_list",
        responses={200: TokenOutputSerializer(many=True), **error_responses()},
    )
    def get(self, request: Request) -> Response:
        return self.respond(TokenOutputSerializer, token_list(user=self.user), many=True)

    @extend_schema(
        operation_id="tokens_create",
        request=TokenCreateInputSerializer,
        responses={
            201: TokenCreatedSerializer,
            **error_responses(
                400,
                403,
                415,
                429,
                _400="`invalid_request` with `fields`: a name you already use, a scope your "
                "account cannot hold, an expiry in the past or after the creating token's.",
                _403="`insufficient_scope`: a token giving a scope it lacks.",
                _429="`login_locked_out`: too many failed passwords (HTTP Basic).",
            ),
        },
    )
    def post(self, request: Request) -> Response:
        data = self.body(TokenCreateInputSerializer)
        created = token_create(
            user=self.user,
            name=data["name"],
            scopes=data.get("scopes"),
            expires_at=data.get("expires_at"),
            creator=self.token,
        )
        return self.respond(TokenCreatedSerializer, created, status=HTTPStatus.CREATED)


class TokenDetailApi(ApiView):
    @extend_schema(
        operation_id="tokens_revoke",
        request=None,
        responses={204: None, **error_responses(403, 404)},
    )
    def delete(self, request: Request, token_id: str) -> Response:
        token_revoke(user=self.user, token_id=token_id)
        return Response(status=HTTPStatus.NO_CONTENT)
