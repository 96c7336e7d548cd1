"""`yoyaku login` and `yoyaku whoami`: a token and the server it is for."""

from __future__ import annotations

import datetime as dt
import os
import re
from typing import Any

import click

from yoyaku_client.cli.common import json_option, open_client, output_for, retry_policy
from yoyaku_client.client import Client
from yoyaku_client.config import config_path, load_settings, save_settings
from yoyaku_client.models import to_jsonable
from yoyaku_client.tokens import TOKEN_SCOPES, token_name_default


@click.command()
@click.option("--url", help="The server's root, e.g. http://127.0.0.1:8000 (without /api).")
@click.option("--token", help="Your API token (asked for when neither it nor --username is given).")
@click.option(
    "--username",
    help="Log in with your password instead (asked for, or YOYAKU_PASSWORD): the server makes "
    "a new token for this client, and only the token is saved.",
)
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    type=click.Choice(TOKEN_SCOPES),
    help="With --username: a scope of the new token (repeat; default: submit and read).",
)
@click.option(
    "--expires-in",
    type=click.IntRange(min=1),
    help="With --username: the new token expires after this many days (default: never).",
)
@json_option
def login(
    url: str | None,
    token: str | None,
    username: str | None,
    scopes: tuple[str, ...],
    expires_in: int | None,
    as_json: bool,
) -> None:
    """Check a token against the server and save both (file mode 0600), or log in with a
    password to get a new scoped token.

    \b
    Examples:
      yoyaku login --url http://127.0.0.1:8000 --token yk_0123456789ab_...
      yoyaku login --url http://127.0.0.1:8000 --username alice --scope read --scope submit
    """
    output = output_for(as_json)
    url = (url or load_settings().url).rstrip("/")
    if not re.match(r"^https?://", url):
        raise click.BadParameter("must start with http:// or https://", param_hint="--url")
    if url.endswith("/api"):
        url = url[: -len("/api")]
    if token and username:
        raise click.UsageError("give --token or --username, not both")
    if (scopes or expires_in) and not username:
        raise click.UsageError("--scope and --expires-in make a new token: use --username")
    created = None
    if username:
        password = os.environ.get("YOYAKU_PASSWORD") or click.prompt(
            "Password", hide_input=True, err=True
        )
        expires_at = None
        if expires_in:
            expires_at = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=expires_in)
        with Client(url, retry=retry_policy()) as client:
            created = client.create_token(
                token_name_default(),
                scopes=list(scopes) or None,
                expires_at=expires_at,
                username=username,
                password=password,
            )
        token = created.token
    if not token:
        token = click.prompt("Token", hide_input=True, err=True)
    with Client(url, token, retry=retry_policy()) as client:
        me = client.me()
    path = save_settings(url, token or "")
    if as_json:
        document: dict[str, Any] = {"url": url, "user": me, "config_file": str(path)}
        if created is not None:
            document["token"] = {k: v for k, v in to_jsonable(created).items() if k != "token"}
        output.json(document)
    else:
        made = ""
        if created is not None:
            made = f" with a new token {created.name!r} ({' '.join(created.scopes)})"
        output.print(f"Logged in to {url} as {me.username}{made}; settings saved in {path}")


@click.command()
@json_option
def whoami(as_json: bool) -> None:
    """Show who the token belongs to, and where the settings came from.

    \b
    Example:
      yoyaku whoami --json
    """
    output = output_for(as_json)
    settings = load_settings()
    with open_client(output) as client:
        me = client.me()
    if as_json:
        output.json(
            {
                "user": me,
                "url": settings.url,
                "url_source": settings.url_source,
                "token_source": settings.token_source,
                "config_file": str(config_path()),
            }
        )
        return
    output.fields(
        None,
        [
            ("user", f"{me.username} (id {me.id})"),
            ("staff", me.is_staff),
            ("reviewer", me.is_reviewer),
            ("server", f"{settings.url} (from {settings.url_source})"),
            ("token", f"from {settings.token_source}"),
        ],
    )
