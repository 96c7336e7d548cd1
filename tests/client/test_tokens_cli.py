"""`yoyaku login --username` turns a password into a scoped token (only the token is saved);
`yoyaku token list|create|revoke` manage tokens; a revoked token stops working at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User

from apps.core.models import ApiToken
from tests.client.conftest import Cli
from tests.factories.tokens import make_token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
PASSWORD = "pw-for-tests"


def test_login_with_a_password_saves_a_new_scoped_token_and_never_the_password(
    cli: Cli, researcher: User, tmp_path: Path
) -> None:
    anonymous = cli.as_user(None)
    data = anonymous.json(
        "login",
        "--url",
        cli.url,
        "--username",
        "researcher",
        "--scope",
        "read",
        "--expires-in",
        "7",
        YOYAKU_URL="",
        YOYAKU_PASSWORD=PASSWORD,
    )
    assert data["user"]["username"] == "researcher"
    assert data["token"]["scopes"] == ["read"]
    assert "token" not in data["token"]
    saved = (tmp_path / "yoyaku-config" / "config.json").read_text()
    assert PASSWORD not in saved
    made = ApiToken.objects.get(user=researcher, name__startswith="yoyaku login")
    assert made.scope_list == ["read"]
    assert made.expires_at is not None

    # The saved token works, and only within its scope.
    assert anonymous.json("whoami", YOYAKU_URL="")["user"]["username"] == "researcher"
    refused = anonymous.run("token", "create", "wider", "--scope", "submit", "--json")
    assert refused.code == 1
    assert refused.json()["code"] == "insufficient_scope"


def test_login_with_a_wrong_password_saves_nothing(cli: Cli, tmp_path: Path) -> None:
    result = cli.as_user(None).run(
        "login", "--url", cli.url, "--username", "researcher", "--json", YOYAKU_PASSWORD="guess"
    )
    assert result.code == 1
    assert result.json()["code"] == "authentication_failed"
    assert not (tmp_path / "yoyaku-config" / "config.json").exists()


def test_login_refuses_a_token_and_a_username_together(cli: Cli) -> None:
    result = cli.run("login", "--url", cli.url, "--token", "x", "--username", "researcher")
    assert result.code == 2


def test_token_create_list_and_revoke(cli: Cli, researcher: User) -> None:
    created = cli.json("token", "create", "ci", "--scope", "read", "--expires-in", "30")
    assert created["name"] == "ci"
    assert created["scopes"] == ["read"]
    assert created["expires_at"] is not None
    secret = created["token"]

    listed = cli.json("token", "list")
    assert "ci" in [row["name"] for row in listed]
    assert secret not in str(listed)
    assert all("token" not in row for row in listed)

    ci = cli.as_user(secret)
    assert ci.json("whoami")["user"]["username"] == "researcher"
    assert cli.json("token", "revoke", created["id"]) == {"id": created["id"], "revoked": True}
    revoked = ci.run("whoami", "--json")
    assert revoked.code == 1
    assert revoked.json()["code"] == "authentication_failed"
    assert "ci" not in [row["name"] for row in cli.json("token", "list")]


def test_token_revoke_of_another_users_token_is_refused(cli: Cli) -> None:
    from tests.factories.users import make_user

    other = make_user(username="someone")
    make_token(other, name="theirs")
    theirs = ApiToken.objects.get(user=other, name="theirs")
    result = cli.run("token", "revoke", theirs.pk, "--json")
    assert result.code == 1
    assert result.json()["code"] == "permission_denied"
    assert ApiToken.objects.filter(pk=theirs.pk).exists()
