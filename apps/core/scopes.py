"""API token scopes: what a token may do, on top of what its user may do.

A token carries a set of scopes; a request authenticated by it runs only if the view's scope
for that request is among them (else 403 `insufficient_scope`). A scope never grants more than
the user has: the view's own rights checks (reviewer, staff, ownership) still run. Session,
password and the platform's own signed self-calls carry no scopes (a Life's calls were checked
against the booking token's scopes when it was booked: `call_scope`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models
from django.urls import Resolver404, resolve

from apps.core.exceptions import InsufficientScope, PermissionDenied
from apps.core.permissions import user_is_reviewer

if TYPE_CHECKING:
    from apps.core.models import ApiToken

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class Scope(models.TextChoices):
    READ = "read", "every GET"
    SUBMIT = "submit", "writes on one's own objects (submissions, jobs, reservations, schedules)"
    REVIEW = "review", "the review API (reviewers)"
    HOST = "host", "managing one's challenges"
    ADMIN = "admin", "staff-only actions (regrades, staff-only task topics)"


ALL_SCOPES: frozenset[str] = frozenset(Scope.values)
DEFAULT_SCOPES: tuple[str, ...] = (Scope.SUBMIT, Scope.READ)
#: The order scopes are stored and shown in.
SCOPE_ORDER: tuple[str, ...] = tuple(Scope.values)


def scopes_normalize(scopes: Iterable[str]) -> list[str]:
    """Known scopes, each once, in the canonical order (unknown names are dropped: callers
    validate first)."""
    given = set(scopes)
    return [scope for scope in SCOPE_ORDER if scope in given]


def scopes_allowed(user: AbstractBaseUser | AnonymousUser) -> set[str]:
    """The scopes `user` may put on a token: `read`, `submit`, `host` for everyone, `review`
    for reviewers and staff, `admin` for staff."""
    allowed = {Scope.READ.value, Scope.SUBMIT.value, Scope.HOST.value}
    staff = bool(getattr(user, "is_staff", False))
    if staff or user_is_reviewer(user):
        allowed.add(Scope.REVIEW.value)
    if staff:
        allowed.add(Scope.ADMIN.value)
    return allowed


def method_scope(method: str) -> str:
    """The derived scope of a request: `read` for a safe method, `submit` for any other."""
    return Scope.READ.value if method.upper() in SAFE_METHODS else Scope.SUBMIT.value


def call_scope(*, method: str, path: str, body: Any = None) -> str:
    """The scope a request to `path` needs, as its view declares it (for a Life's action or a
    header booking, checked against the booking token). A path outside the platform needs
    `submit` (booking it is a write); a platform path that is no API view needs `admin`
    (deny by default)."""
    if not path.startswith("/") or path.startswith("//"):
        return Scope.SUBMIT.value
    try:
        match = resolve(urlsplit(path).path)
    except Resolver404:
        return Scope.ADMIN.value
    view_class = getattr(match.func, "view_class", None) or getattr(match.func, "cls", None)
    scope_for = getattr(view_class, "scope_for", None)
    if scope_for is None:
        return Scope.ADMIN.value
    scope: str | None = scope_for(method.upper(), body)
    return scope if scope is not None else Scope.READ.value


def scopes_require(token: ApiToken, *scopes: str) -> None:
    """InsufficientScope (403 `insufficient_scope`) unless `token` holds every one of `scopes`.

    A scope the token's user could not hold at all is PermissionDenied instead (403
    `permission_denied`, as with a session): the account, not the token, lacks the right."""
    for scope in scopes:
        if not token.has_scope(scope):
            if scope not in scopes_allowed(token.user):
                raise PermissionDenied(
                    f"Your account may not do this (it needs the {scope!r} right)."
                )
            raise InsufficientScope(
                f"This request needs a token with the {scope!r} scope "
                f"(this token has: {', '.join(token.scope_list) or 'none'})."
            )
