"""Raw-body requests through the test client (the stubs type a body as text only)."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient


def send(
    client: APIClient,
    method: str,
    path: str,
    body: bytes = b"",
    *,
    content_type: str = "application/octet-stream",
    headers: dict[str, str] | None = None,
) -> Any:
    return client.generic(method, path, body, content_type, headers=headers or {})  # type: ignore[arg-type]
