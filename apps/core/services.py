"""Platform services: demo accounts for a fresh installation, process heartbeats."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser
from django.db import transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from apps.core.exceptions import DemoAccountsDisabled
from apps.core.models import Heartbeat
from apps.core.permissions import reviewer_permission

User = get_user_model()


@dataclass(frozen=True)
class Account:
    username: str
    password: str
    token: str
    role: str


def _account_ensure(
    *, username: str, password: str, staff: bool = False, superuser: bool = False
) -> tuple[AbstractUser, str]:
    user, created = User.objects.get_or_create(username=username)
    if created:
        user.set_password(password)
        user.is_staff = staff
        user.is_superuser = superuser
        user.save()
    token, _ = Token.objects.get_or_create(user=user)
    return user, token.key


def demo_accounts_assert_allowed() -> None:
    """Raise DemoAccountsDisabled unless `DEBUG` is on (SPEC §10: demo accounts only then)."""
    if not settings.DEBUG:
        raise DemoAccountsDisabled()


def demo_accounts_ensure(*, password: str) -> list[Account]:
    """Create (once) a demo user, a demo reviewer and an admin, each with an API token.

    Only with `DEBUG` on (DemoAccountsDisabled otherwise, creating nothing): the accounts have
    a published password and `admin` is a superuser. Idempotent: existing users keep their
    passwords and tokens; their current tokens are returned. The reviewer gets
    the reviewer permission (`apps.core.permissions`) when the review app defines it.
    """
    demo_accounts_assert_allowed()
    accounts: list[Account] = []
    with transaction.atomic():
        _, token = _account_ensure(username="demo", password=password)
        accounts.append(Account("demo", password, token, "user"))
        reviewer, token = _account_ensure(username="reviewer", password=password)
        permission = reviewer_permission()
        if permission is not None:
            reviewer.user_permissions.add(permission)
        accounts.append(Account("reviewer", password, token, "reviewer"))
        _, token = _account_ensure(username="admin", password=password, staff=True, superuser=True)
        accounts.append(Account("admin", password, token, "admin"))
    return accounts


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
