"""Template context shared by the bundled pages."""

from __future__ import annotations

from django.http import HttpRequest

from apps.core.permissions import user_is_reviewer


def reviewer(request: HttpRequest) -> dict[str, bool]:
    """`user_is_reviewer`: whether the page may offer the review link."""
    return {"user_is_reviewer": user_is_reviewer(getattr(request, "user", None))}
