"""No usable token anywhere but in the answer that created it: not in any column of any table,
not in the admin (crawled as a view-only staff user), not in the request log. An old DRF key
migrates into a digest and keeps working; its clear-text table is gone."""

from __future__ import annotations

import base64
import logging
import re
from collections import deque
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.core.services import token_authenticate
from tests.factories.tokens import make_token
from tests.factories.users import make_user

WINDOW = 16


def _fragments(tokens: list[str]) -> set[str]:
    """Every 16-character piece of every token: finding one is finding part of a secret."""
    return {t[i : i + WINDOW] for t in tokens for i in range(len(t) - WINDOW + 1)}


def _leaks(text: str, fragments: set[str]) -> list[str]:
    return sorted(f for f in fragments if f in text)


def _database_text() -> str:
    """Every value of every column of every table, as text (what a backup holds)."""
    parts: list[str] = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")  # noqa: S608
            for row in cursor.fetchall():
                for value in row:
                    if isinstance(value, bytes | memoryview):
                        value = bytes(value).decode("latin-1")
                    parts.append(str(value))
    return "\n".join(parts)


def _api_tokens(staff: User) -> list[str]:
    """Tokens made every way there is: the API (token, session, password), the factory."""
    plain = make_user(username="plain")
    tokens = [make_token(staff), make_token(plain, scopes=["read"])]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens[0]}")
    tokens.append(client.post("/api/tokens/", {"name": "ci"}, format="json").json()["token"])
    session = APIClient()
    session.force_login(plain)
    tokens.append(session.post("/api/tokens/", {"name": "web"}, format="json").json()["token"])
    password = APIClient()
    raw = base64.b64encode(b"plain:pw-for-tests").decode()
    password.credentials(HTTP_AUTHORIZATION=f"Basic {raw}")
    tokens.append(password.post("/api/tokens/", {"name": "cli"}, format="json").json()["token"])
    for token in tokens:  # used, so last_used_at and the request log have seen them
        user_client = APIClient()
        user_client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        assert user_client.get("/api/me/").status_code == HTTPStatus.OK
    return tokens


@pytest.mark.django_db
def test_no_column_of_any_table_holds_a_usable_token(
    staff_user: User, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    tokens = _api_tokens(staff_user)
    fragments = _fragments(tokens)
    dump = _database_text()
    assert "ci" in dump  # the dump did read the tables
    assert len(dump) > 1000
    assert _leaks(dump, fragments) == []
    assert _leaks(caplog.text, fragments) == []


@pytest.mark.django_db
def test_a_view_only_staff_user_finds_no_token_anywhere_in_the_admin(staff_user: User) -> None:
    tokens = _api_tokens(staff_user)
    viewer = make_user(username="viewer", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    client = Client()
    client.force_login(viewer)
    assert client.get("/admin/authtoken/tokenproxy/").status_code == HTTPStatus.NOT_FOUND
    assert client.get("/admin/authtoken/token/").status_code == HTTPStatus.NOT_FOUND

    fragments = _fragments(tokens)
    seen: set[str] = set()
    queue = deque(["/admin/", "/admin/core/apitoken/"])
    pages = 0
    while queue and pages < 400:
        url = queue.popleft()
        if url in seen:
            continue
        seen.add(url)
        response = client.get(url)
        if response.status_code != HTTPStatus.OK or "html" not in response["Content-Type"]:
            continue
        pages += 1
        html = response.content.decode()
        assert _leaks(html, fragments) == [], url
        for link in re.findall(r'href="(/admin/[^"#]*)"', html):
            link = link.replace("&amp;", "&")
            if "logout" not in link and "delete" not in link and link not in seen:
                queue.append(link)
    # The crawl reached the token list and each token's page (names, scopes and dates).
    token_pages = {u.split("/")[4] for u in seen if re.match(r"^/admin/core/apitoken/\w{32}/", u)}
    assert len(token_pages) == len(tokens)
    listing = client.get("/admin/core/apitoken/").content.decode()
    assert "ci" in listing
    assert "read submit" in listing


LEGACY_DDL = {
    "sqlite": 'CREATE TABLE "authtoken_token" ("key" varchar(40) NOT NULL PRIMARY KEY, '
    '"created" datetime NOT NULL, "user_id" integer NOT NULL UNIQUE)',
    "postgresql": 'CREATE TABLE "authtoken_token" ("key" varchar(40) NOT NULL PRIMARY KEY, '
    '"created" timestamp with time zone NOT NULL, "user_id" integer NOT NULL UNIQUE)',
}


@pytest.mark.django_db(transaction=True)
def test_an_old_drf_key_keeps_working_after_the_migration_and_its_table_is_gone() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([("core", "0002_api_tokens")])
    staff = make_user(username="old-staff", is_staff=True)
    plain = make_user(username="old-plain")
    keys = {staff.pk: "a1" * 20, plain.pk: "b2" * 20}
    with connection.cursor() as cursor:
        cursor.execute(LEGACY_DDL[connection.vendor])
        for user_id, key in keys.items():
            created: Any = timezone.now()
            if connection.vendor == "sqlite":
                created = created.replace(tzinfo=None).isoformat(sep=" ")
            cursor.execute(
                'INSERT INTO "authtoken_token" ("key", "created", "user_id") VALUES (%s, %s, %s)',
                [key, created, user_id],
            )

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([("core", "0003_hash_legacy_tokens")])

    assert "authtoken_token" not in connection.introspection.table_names()
    assert _leaks(_database_text(), _fragments(list(keys.values()))) == []
    migrated = {uid: token_authenticate(token=key) for uid, key in keys.items()}
    assert migrated[staff.pk].user == staff
    assert migrated[staff.pk].scope_list == ["read", "submit", "review", "host", "admin"]
    assert migrated[plain.pk].scope_list == ["read", "submit", "host"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {keys[plain.pk]}")
    assert client.get("/api/me/").json()["username"] == "old-plain"
