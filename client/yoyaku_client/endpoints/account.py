"""`/api/me/` and `/api/tokens/`: who the token is, and your tokens."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from yoyaku_client import models
from yoyaku_client.endpoints.base import ApiBase
from yoyaku_client.models import Me
from yoyaku_client.transport import Safety

if TYPE_CHECKING:
    from yoyaku_client.models import ApiToken


class AccountApi(ApiBase):
    """Who the token is; your API tokens."""

    def me(self) -> Me:
        """`GET /api/me/`: who the token belongs to."""
        return Me.from_api(self._json("GET", "/me/"))

    def list_tokens(self) -> list[ApiToken]:
        """`GET /api/tokens/`: your tokens, without their secrets."""
        return [models.ApiToken.from_api(t) for t in self._json("GET", "/tokens/")]

    def create_token(
        self,
        name: str,
        *,
        scopes: Sequence[str] | None = None,
        expires_at: dt.datetime | str | None = None,
        username: str | None = None,
        password: str | None = None,
    ) -> ApiToken:
        """`POST /api/tokens/`: a new token; its secret is in `.token`, shown this once.

        `scopes` default to the server's (`submit read`). With `username` and `password` the
        request is authenticated by the password (HTTP Basic) instead of this client's token
        (how `yoyaku login --username` gets a token). Not repeated after a lost answer
        (`AmbiguousRequestError`): the token the server made could not be shown again.
        """
        body: dict[str, Any] = {"name": name}
        if scopes is not None:
            body["scopes"] = list(scopes)
        if expires_at is not None:
            body["expires_at"] = (
                expires_at.isoformat() if isinstance(expires_at, dt.datetime) else expires_at
            )
        headers = {}
        if username is not None:
            raw = f"{username}:{password or ''}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(raw).decode("ascii")
        data = self._json("POST", "/tokens/", json=body, headers=headers, safety=Safety.UNSAFE)
        return models.ApiToken.from_api(data)

    def revoke_token(self, token_id: str) -> None:
        """`DELETE /api/tokens/{id}/`: the token stops working at once."""
        self.transport.request("DELETE", f"/tokens/{token_id}/")
