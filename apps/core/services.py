"""Platform services: API tokens, demo accounts for a fresh installation, process heartbeats."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AbstractUser
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from apps.core.exceptions import (
    DemoAccountsDisabled,
    InsufficientScope,
    InvalidRequest,
    TokenInvalid,
)
from apps.core.models import ApiToken, Heartbeat
from apps.core.permissions import reviewer_permission
from apps.core.scopes import DEFAULT_SCOPES, scopes_allowed, scopes_normalize
from apps.core.selectors import owned_get, token_with_user
from apps.core.tokens import digests_match, token_generate, token_parts

User = get_user_model()


DEMO_TOKEN_NAME = "demo"  # noqa: S105 - a token's name, not a secret
#: `last_used_at` is written at most once per this interval per token (no write per request).
LAST_USED_GRANULARITY = dt.timedelta(seconds=60)


@dataclass(frozen=True)
class CreatedToken:
    api_token: ApiToken
    token: str


@dataclass(frozen=True)
class Account:
    username: str
    password: str
    token: str
    role: str


def _account_ensure(
    *, username: str, password: str, staff: bool = False, superuser: bool = False
) -> AbstractUser:
    user, created = User.objects.get_or_create(username=username)
    if created:
        user.set_password(password)
        user.is_staff = staff
        user.is_superuser = superuser
        user.save()
    return user


def _demo_token_issue(*, username: str) -> str:
    """Revoke the account's previous demo token and make a new one with every scope the
    account may hold (read fresh, so a permission granted just now counts)."""
    user = User.objects.get(username=username)
    ApiToken.objects.filter(user=user, name=DEMO_TOKEN_NAME).delete()
    created = token_create(user=user, name=DEMO_TOKEN_NAME, scopes=sorted(scopes_allowed(user)))
    return created.token


def demo_accounts_assert_allowed() -> None:
    """Raise DemoAccountsDisabled unless `DEBUG` is on (SPEC §10: demo accounts only then)."""
    if not settings.DEBUG:
        raise DemoAccountsDisabled()


def demo_accounts_ensure(*, password: str) -> list[Account]:
    """Create (once) a demo user, a demo reviewer and an admin, each with a fresh API token.

    Only with `DEBUG` on (DemoAccountsDisabled otherwise, creating nothing): the accounts have
    a published password and `admin` is a superuser. Existing users keep their passwords; each
    run revokes the account's previous demo token (`DEMO_TOKEN_NAME`) and returns a new one with
    every scope the account may hold (tokens are stored hashed, so an old one cannot be shown
    again). The reviewer gets the reviewer permission (`apps.core.permissions`) when the review
    app defines it.
    """
    demo_accounts_assert_allowed()
    accounts: list[Account] = []
    with transaction.atomic():
        _account_ensure(username="demo", password=password)
        accounts.append(Account("demo", password, _demo_token_issue(username="demo"), "user"))
        reviewer = _account_ensure(username="reviewer", password=password)
        permission = reviewer_permission()
        if permission is not None:
            reviewer.user_permissions.add(permission)
        token = _demo_token_issue(username="reviewer")
        accounts.append(Account("reviewer", password, token, "reviewer"))
        _account_ensure(username="admin", password=password, staff=True, superuser=True)
        accounts.append(Account("admin", password, _demo_token_issue(username="admin"), "admin"))
    return accounts


def token_create(
    *,
    user: AbstractBaseUser,
    name: str,
    scopes: list[str] | None = None,
    expires_at: dt.datetime | None = None,
    creator: ApiToken | None = None,
) -> CreatedToken:
    """A new named API token of `user`; the token string is returned here and kept nowhere.

    `scopes` default to `submit read`; each must be one `user` may hold (`scopes_allowed`),
    else InvalidRequest. `creator` is the token authenticating the request, if any: a token
    never mints a token with a scope it lacks (InsufficientScope), nor one that outlives it
    (a later `expires_at` is InvalidRequest; none inherits the creator's). An `expires_at` in
    the past is InvalidRequest; a name the user already uses is InvalidRequest (the unique
    constraint `core_apitoken_unique_name` decides under concurrency).
    """
    wanted = scopes_normalize(DEFAULT_SCOPES if scopes is None else scopes)
    if not wanted:
        raise InvalidRequest(
            "A token needs at least one scope.", fields={"scopes": ["Give at least one scope."]}
        )
    beyond_role = [scope for scope in wanted if scope not in scopes_allowed(user)]
    if beyond_role:
        raise InvalidRequest(
            f"Your account cannot hold the scope {beyond_role[0]!r}.",
            fields={"scopes": [f"Not allowed for your account: {', '.join(beyond_role)}."]},
        )
    if creator is not None:
        lacking = [scope for scope in wanted if not creator.has_scope(scope)]
        if lacking:
            raise InsufficientScope(
                f"A token cannot create a token with scopes it lacks ({', '.join(lacking)})."
            )
        if creator.expires_at is not None:
            if expires_at is None:
                expires_at = creator.expires_at
            elif expires_at > creator.expires_at:
                raise InvalidRequest(
                    "A token cannot create a token that outlives it.",
                    fields={"expires_at": [f"At most {creator.expires_at.isoformat()}."]},
                )
    if expires_at is not None and expires_at <= timezone.now():
        raise InvalidRequest(
            "The expiry is in the past.", fields={"expires_at": ["Must be in the future."]}
        )
    new = token_generate()
    api_token = ApiToken(
        user_id=user.pk,
        name=name,
        key_id=new.parts.key_id,
        digest=new.parts.digest,
        scopes=" ".join(wanted),
        expires_at=expires_at,
    )
    try:
        with transaction.atomic():
            api_token.save(force_insert=True)
    except IntegrityError as exc:
        raise InvalidRequest(
            f"You already have a token named {name!r}.",
            fields={"name": ["You already have a token with this name; revoke it first."]},
        ) from exc
    return CreatedToken(api_token=api_token, token=new.token)


def token_revoke(*, user: AbstractBaseUser, token_id: str) -> None:
    """Revoke (delete) one of `user`'s tokens: the next request with it is a 401. NotFound
    for an unknown id, PermissionDenied for another user's (never its data). A request that
    authenticated with the token just before the delete may still finish."""
    with transaction.atomic():
        api_token = owned_get(
            ApiToken.objects.all(),
            lookup={"id": token_id},
            user=user,
            label="Token",
            owner_attr="user_id",
        )
        api_token.delete()


def token_authenticate(*, token: str) -> ApiToken:
    """The live token `token` is (with its user, one indexed query), else TokenInvalid.

    Unknown, revoked, expired and inactive-user tokens are all TokenInvalid. The stored digest
    is compared in constant time. `last_used_at` is written by a conditional UPDATE at most
    once per LAST_USED_GRANULARITY per token, so the request path gains no write per request.
    """
    parts = token_parts(token)
    if parts is None:
        raise TokenInvalid()
    api_token = token_with_user(key_id=parts.key_id)
    if api_token is None or not digests_match(api_token.digest, parts.digest):
        raise TokenInvalid()
    now = timezone.now()
    if api_token.expires_at is not None and api_token.expires_at <= now:
        raise TokenInvalid("Token expired.")
    if not api_token.user.is_active:
        raise TokenInvalid("User inactive or deleted.")
    if api_token.last_used_at is None or api_token.last_used_at <= now - LAST_USED_GRANULARITY:
        stale = Q(last_used_at__isnull=True) | Q(last_used_at__lte=now - LAST_USED_GRANULARITY)
        ApiToken.objects.filter(stale, pk=api_token.pk).update(last_used_at=now)
        api_token.last_used_at = now
    return api_token


def heartbeat_beat(*, name: str, detail: dict[str, object] | None = None) -> Heartbeat:
    """Record one tick of process `name`: locks its row, increments `beats`, sets `last_tick`.

    Safe under concurrency on PostgreSQL (row lock) and SQLite (IMMEDIATE transaction).
    """
    with transaction.atomic():
        beat, _ = Heartbeat.objects.select_for_update().get_or_create(
            name=name, defaults={"last_tick": timezone.now()}
        )
        beat.beats += 1
        beat.last_tick = timezone.now()
        if detail is not None:
            beat.detail = detail
        beat.save(update_fields=["beats", "last_tick", "detail"])
    return beat


def heartbeat_forget(*, name: str) -> None:
    """Remove process `name`'s heartbeat (it stopped on purpose)."""
    Heartbeat.objects.filter(name=name).delete()


def heartbeats_purge(*, prefix: str, older_than: dt.datetime, dry_run: bool = False) -> int:
    """Remove the heartbeats named `prefix...` silent since before `older_than` (processes that
    died without saying so); returns how many."""
    stale = Heartbeat.objects.filter(name__startswith=prefix, last_tick__lt=older_than)
    if dry_run:
        return stale.count()
    removed, _ = stale.delete()
    return removed
