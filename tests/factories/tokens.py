"""API tokens for tests: the token string, made through the service (hashed like any other)."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterable

from django.contrib.auth.models import AbstractBaseUser, User

from apps.core.scopes import scopes_allowed
from apps.core.services import token_create

_names = itertools.count(1)


def make_token(
    user: AbstractBaseUser,
    *,
    scopes: Iterable[str] | None = None,
    name: str | None = None,
    expires_at: dt.datetime | None = None,
) -> str:
    """A new token of `user`; `scopes` default to every scope the user may hold (the power a
    session has), so tests that are not about scopes behave as before tokens had them."""
    fresh = User.objects.get(pk=user.pk)  # permissions granted after `user` was loaded count
    created = token_create(
        user=fresh,
        name=name or f"test-{next(_names)}",
        scopes=sorted(scopes_allowed(fresh)) if scopes is None else list(scopes),
        expires_at=expires_at,
    )
    return created.token
