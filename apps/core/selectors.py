from __future__ import annotations

import datetime as dt
import functools
from typing import Any, TypeVar

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Model, Q, QuerySet
from django.utils import timezone

from apps.core.exceptions import NotFound, PermissionDenied
from apps.core.models import ApiToken, Heartbeat
from apps.core.sql import SqlStatement, model_from_row
from apps.core.validation import contains_nul

M = TypeVar("M", bound=Model)


def heartbeat_get(*, name: str) -> Heartbeat | None:
    return Heartbeat.objects.filter(name=name).first()


def heartbeats_named(*, name: str, prefix: str) -> list[tuple[str, dt.datetime]]:
    """(name, last tick) of the heartbeat `name` and of those whose name starts with `prefix`
    (a handful of rows: one per running process of a kind)."""
    rows = Heartbeat.objects.filter(Q(name=name) | Q(name__startswith=prefix)).values_list(
        "name", "last_tick"
    )
    return [(str(row_name), tick) for row_name, tick in rows]


def owned_get(
    queryset: QuerySet[M],
    *,
    lookup: dict[str, Any],
    user: AbstractBaseUser | AnonymousUser | None,
    label: str,
    owner_attr: str = "owner_id",
    for_update: bool = False,
) -> M:
    """The one object matching `lookup`, owned by `user` when given.

    NotFound when there is none (also for a key containing NUL, which PostgreSQL cannot even
    compare), PermissionDenied for another user's object — never its data. `user=None` is an
    operator: no ownership check. With `for_update` the row is locked until the transaction
    ends (call inside `transaction.atomic()`).
    """
    shown = next(iter(lookup.values()), "")
    if any(contains_nul(str(value)) for value in lookup.values()):
        raise NotFound(f"{label} {shown!r} not found.")
    if for_update:
        queryset = queryset.select_for_update(of=("self",))
    obj = queryset.filter(**lookup).first()
    if obj is None:
        raise NotFound(f"{label} {shown} not found.")
    if user is not None and getattr(obj, owner_attr) != user.pk:
        raise PermissionDenied(f"This {label.lower()} belongs to another user.")
    return obj


def token_list(*, user: AbstractBaseUser) -> QuerySet[ApiToken]:
    """`user`'s API tokens, oldest first (never another user's: staff included)."""
    return ApiToken.objects.filter(user_id=user.pk).order_by("created_at", "id")


def token_live(*, token_id: str, now: dt.datetime | None = None) -> bool:
    """Whether the API token `token_id` still authenticates: it exists (not revoked), has not
    expired by `now` and its user is active (the rules of `token_authenticate`, by id). One
    indexed query; for work a token booked earlier and the platform runs later."""
    now = now or timezone.now()
    return (
        ApiToken.objects.filter(pk=token_id, user__is_active=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .exists()
    )


def _all_columns(alias: str, model: type[Model]) -> str:
    return ", ".join(f"{{{alias}}}.{{{alias}.{f.name}}}" for f in model._meta.concrete_fields)


@functools.cache
def _token_lookup() -> SqlStatement:
    # Built on first use: the user model is the installed one (`AUTH_USER_MODEL`).
    user_model = get_user_model()
    columns = f"{_all_columns('t', ApiToken)}, {_all_columns('u', user_model)}"
    pk = f"{{u.{user_model._meta.pk.name}}}"
    return SqlStatement(
        f"SELECT {columns} FROM {{t}} INNER JOIN {{u}} ON {{u}}.{pk} = {{t}}.{{t.user}} "  # noqa: S608 - names from _meta
        "WHERE {t}.{t.key_id} = %s",
        t=ApiToken,
        u=user_model,
    )


def token_with_user(*, key_id: str, using: str = "default") -> ApiToken | None:
    """The API token whose lookup id is `key_id`, with its user loaded (one indexed join), or
    None. What `ApiToken.objects.select_related("user").filter(key_id=…).first()` reads,
    without compiling that query on every authenticated request (it cost about as much CPU
    as the rest of the token check; docs/benchmarks.md)."""
    row = _token_lookup().fetchone([key_id], using=using)
    if row is None:
        return None
    split = len(ApiToken._meta.concrete_fields)
    api_token = model_from_row(ApiToken, row[:split], using=using)
    api_token.user = model_from_row(get_user_model(), row[split:], using=using)
    return api_token
