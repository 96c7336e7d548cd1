from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from http import HTTPStatus
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django_q.models import Schedule
from rest_framework.test import APIClient

from apps.core.cleanup import CleanupReport, register_cleanup, unregister_cleanup
from apps.core.exceptions import DemoAccountsDisabled
from apps.core.models import ApiToken, Heartbeat
from apps.core.services import demo_accounts_ensure
from apps.core.tasks import cleanup_periodic

pytestmark = pytest.mark.django_db


@pytest.fixture
def stale_heartbeats() -> Iterator[None]:
    """A cleanup kind over real rows: heartbeats not seen for a day."""

    @register_cleanup("test-heartbeats", "heartbeats older than a day")
    def purge(*, now: dt.datetime, dry_run: bool) -> CleanupReport:
        stale = Heartbeat.objects.filter(last_tick__lt=now - dt.timedelta(days=1))
        items = [beat.name for beat in stale]
        if not dry_run:
            stale.delete()
        return CleanupReport(kind="test-heartbeats", count=len(items), items=items)

    now = dt.datetime.now(tz=dt.UTC)
    Heartbeat.objects.create(name="old", last_tick=now - dt.timedelta(days=3))
    Heartbeat.objects.create(name="new", last_tick=now)
    yield
    unregister_cleanup("test-heartbeats")


def test_cleanup_dry_run_reports_and_deletes_nothing(stale_heartbeats: None) -> None:
    out = StringIO()
    call_command("cleanup", "--dry-run", "--only", "test-heartbeats", stdout=out)
    assert "test-heartbeats: would remove 1" in out.getvalue()
    assert "  old" in out.getvalue()
    assert Heartbeat.objects.count() == 2


def test_cleanup_removes_what_the_dry_run_showed(stale_heartbeats: None) -> None:
    out = StringIO()
    call_command("cleanup", "--only", "test-heartbeats", stdout=out)
    assert "test-heartbeats: removed 1" in out.getvalue()
    assert list(Heartbeat.objects.values_list("name", flat=True)) == ["new"]


def test_cleanup_refuses_an_unknown_kind() -> None:
    with pytest.raises(CommandError, match="unknown kind: nope"):
        call_command("cleanup", "--only", "nope", stdout=StringIO())


def test_periodic_cleanup_task_runs_every_kind(stale_heartbeats: None) -> None:
    summary = cleanup_periodic()
    assert summary["test-heartbeats"] == 1
    assert Heartbeat.objects.filter(name="old").count() == 0


def _printed_tokens(output: str) -> dict[str, str]:
    return {
        line.split("username=", 1)[1].split()[0]: line.rsplit("token=", 1)[1]
        for line in output.splitlines()
        if "token=" in line
    }


def test_bootstrap_prints_fresh_working_tokens_and_revokes_the_previous_ones(
    settings: Any,
) -> None:
    settings.DEBUG = True
    first, second = StringIO(), StringIO()
    call_command("bootstrap", stdout=first)
    call_command("bootstrap", stdout=second)
    assert Schedule.objects.filter(name="yoyaku.cleanup").count() == 1
    old, new = _printed_tokens(first.getvalue()), _printed_tokens(second.getvalue())
    assert set(new) == {"demo", "reviewer", "admin"}
    # One demo token per account however often bootstrap runs: the previous one is revoked.
    assert ApiToken.objects.filter(name="demo").count() == 3

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {new['demo']}")
    assert client.get("/api/me/").json()["username"] == "demo"
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {old['demo']}")
    assert client.get("/api/me/").status_code == HTTPStatus.UNAUTHORIZED
    scopes = {t.user.username: t.scope_list for t in ApiToken.objects.select_related("user")}
    assert scopes == {
        "demo": ["read", "submit", "host"],
        "reviewer": ["read", "submit", "review", "host"],
        "admin": ["read", "submit", "review", "host", "admin"],
    }


def test_bootstrap_refuses_demo_accounts_with_debug_off_and_creates_nothing(
    settings: Any,
) -> None:
    settings.DEBUG = False
    with pytest.raises(CommandError, match="only with DEBUG on"):
        call_command("bootstrap", stdout=StringIO())
    # Not the superuser with the published password, not a token, not even the schedules.
    assert not User.objects.exists()
    assert not ApiToken.objects.exists()
    assert not Schedule.objects.exists()
    with pytest.raises(DemoAccountsDisabled):
        demo_accounts_ensure(password="yoyaku-demo")
    assert not User.objects.exists()


def test_bootstrap_without_accounts_still_works_with_debug_off(settings: Any) -> None:
    settings.DEBUG = False
    out = StringIO()
    call_command("bootstrap", "--no-accounts", stdout=out)
    assert "schedule ensured: yoyaku.cleanup" in out.getvalue()
    assert not User.objects.exists()


def test_bootstrap_mends_duplicate_schedules() -> None:
    for _ in range(2):
        Schedule.objects.create(name="yoyaku.cleanup", func="x", schedule_type=Schedule.ONCE)
    call_command("bootstrap", "--no-accounts", stdout=StringIO())
    schedule = Schedule.objects.get(name="yoyaku.cleanup")
    assert schedule.func == "apps.core.tasks.cleanup_periodic"
    assert schedule.schedule_type == Schedule.MINUTES


def test_healthz_reports_database_and_broker(api_client: APIClient) -> None:
    response = api_client.get("/healthz")
    assert response.status_code == HTTPStatus.OK
    body = response.json()
    assert body["database"] == "ok"
    assert body["broker"] == "ok"
    assert body["status"] in {"ok", "degraded"}


def test_docs_and_schema_are_public(api_client: APIClient) -> None:
    assert api_client.get("/api/schema/").status_code == HTTPStatus.OK
    docs = api_client.get("/api/docs/")
    assert docs.status_code == HTTPStatus.OK
    assert b"swagger-ui" in docs.content
    # Served from our own static files: no script or stylesheet from another origin (a CDN).
    page = docs.content.decode()
    assets = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", page)
    assert any("swagger-ui" in asset for asset in assets)
    assert [a for a in assets if a.startswith(("http:", "https:", "//"))] == []
