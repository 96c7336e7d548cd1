"""`yoyaku token list|create|revoke`: your API tokens."""

from __future__ import annotations

import datetime as dt

import click

from yoyaku_client.cli.common import json_option, open_client, output_for
from yoyaku_client.ids import resolve_id, shortener
from yoyaku_client.models import to_jsonable
from yoyaku_client.output import table_time
from yoyaku_client.tokens import TOKEN_SCOPES


@click.group()
def token() -> None:
    """Your API tokens: list, create (scoped, optional expiry), revoke.

    \b
    Examples:
      yoyaku token create ci --scope submit --scope read --expires-in 30
      yoyaku token list
      yoyaku token revoke 0123456789abcdef0123456789abcdef
    """


@token.command("list")
@json_option
def token_list(as_json: bool) -> None:
    """List your tokens (names, scopes, dates; never a secret).

    \b
    Example:
      yoyaku token list --json
    """
    output = output_for(as_json)
    with open_client(output) as client:
        tokens = client.list_tokens()
    if as_json:
        output.json([{k: v for k, v in to_jsonable(t).items() if k != "token"} for t in tokens])
        return
    short = shortener(t.id for t in tokens)
    output.table(
        None,
        ["id", "name", "scopes", "created", "expires", "last used"],
        [
            [
                short(t.id),
                t.name,
                " ".join(t.scopes),
                table_time(t.created_at),
                table_time(t.expires_at) if t.expires_at else None,
                table_time(t.last_used_at) if t.last_used_at else None,
            ]
            for t in tokens
        ],
    )


@token.command("create")
@click.argument("name")
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    type=click.Choice(TOKEN_SCOPES),
    help="A scope of the new token (repeat; default: submit and read). A token can give only "
    "scopes it holds itself.",
)
@click.option(
    "--expires-in", type=click.IntRange(min=1), help="Days until it expires (default: never)."
)
@json_option
def token_create(name: str, scopes: tuple[str, ...], expires_in: int | None, as_json: bool) -> None:
    """Create a token and print it once (the server keeps only a hash of it).

    \b
    Example:
      yoyaku token create ci --scope submit --scope read --expires-in 30
    """
    output = output_for(as_json)
    expires_at = None
    if expires_in:
        expires_at = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=expires_in)
    with open_client(output) as client:
        created = client.create_token(name, scopes=list(scopes) or None, expires_at=expires_at)
    if as_json:
        output.json(to_jsonable(created))
        return
    output.fields(
        None,
        [
            ("id", created.id),
            ("name", created.name),
            ("scopes", " ".join(created.scopes)),
            ("expires", created.expires_at or "never"),
        ],
    )
    output.message("The token (copy it now: it cannot be shown again):")
    output.print(created.token or "")


@token.command("revoke")
@click.argument("token_id")
@json_option
def token_revoke(token_id: str, as_json: bool) -> None:
    """Revoke a token by its id (`yoyaku token list`): it stops working at once.

    \b
    Example:
      yoyaku token revoke 0123456789abcdef0123456789abcdef
    """
    output = output_for(as_json)
    with open_client(output) as client:
        token_id = resolve_id(
            token_id, kind="token", candidates=lambda: [t.id for t in client.list_tokens()]
        )
        client.revoke_token(token_id)
    if as_json:
        output.json({"id": token_id, "revoked": True})
    else:
        output.print(f"Revoked token {token_id}")
