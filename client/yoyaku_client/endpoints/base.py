"""What every group of operations sends through: the client's one `Transport`."""

from __future__ import annotations

from typing import Any

from yoyaku_client.transport import Safety, Transport


class ApiBase:
    """The transport and its JSON call; `Client` sets `transport` in its constructor."""

    transport: Transport

    def _json(
        self,
        method: str,
        path: str,
        *,
        safety: Safety = Safety.SAFE,
        auth: bool = True,
        **kwargs: Any,
    ) -> Any:
        response = self.transport.request(method, path, safety=safety, auth=auth, **kwargs)
        return response.json()
