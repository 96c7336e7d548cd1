"""Raw-body requests through the test client (the stubs type a body as text only)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tests.factories.submissions import make_submission


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


def attach_to_new_draft(client: APIClient, owner: User, upload_id: str, on_commit: Any) -> Any:
    """Attach the upload as `main.py` to a new draft of `owner`'s, running the callbacks its
    commit registers (`on_commit`: the `django_capture_on_commit_callbacks` fixture)."""
    draft = make_submission(owner=owner, files=())
    with on_commit(execute=True):
        return client.post(
            f"/api/submissions/{draft.pk}/files/",
            {"upload_id": upload_id, "filename": "main.py"},
            format="json",
        )
