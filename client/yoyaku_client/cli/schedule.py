"""`yoyaku schedule book|list|show|cancel`: webhook reservations at an absolute time."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from typing import Any

import click

from yoyaku_client.cli.common import IdCommand, id_command, json_option, open_client, output_for
from yoyaku_client.client import Action, Client
from yoyaku_client.ids import resolve_id, shortener
from yoyaku_client.models import Life
from yoyaku_client.output import Output, table_time

_RELATIVE = re.compile(r"^\+(\d+(?:\.\d+)?)([smhd])$")


def schedule_time_arg(value: str) -> str:
    """`+90s`, `+10m`, `+2h`, `+1d` → an ISO 8601 UTC instant; anything else is sent as written
    (`YYYY-MM-DD HH:MM:SS` in the server's zone, or ISO 8601 with an offset)."""
    match = _RELATIVE.match(value.strip())
    if not match:
        return value
    amount, unit = float(match.group(1)), match.group(2)
    seconds = amount * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    moment = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=seconds)
    return moment.replace(microsecond=0).isoformat()


def _headers(values: Sequence[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for value in values:
        name, sep, text = value.partition(":")
        if not sep or not name.strip():
            raise click.BadParameter(f"{value!r} is not NAME:VALUE", param_hint="--header")
        headers[name.strip()] = text.strip()
    return headers


def _body_arg(value: str | None, name: str) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return value  # sent as text


def _life_rows(lives: Sequence[Life]) -> list[list[Any]]:
    short = shortener(x.life_uuid for x in lives)
    return [
        [
            short(x.life_uuid),
            x.schedule_type,
            x.resource_id or None,
            x.state,
            table_time(x.birth_time),
            table_time(x.death_time) if x.death_time else None,
        ]
        for x in lives
    ]


def life_id_arg(client: Client, given: str) -> str:
    """A Life's uuid or a unique prefix of one of yours."""
    return resolve_id(
        given, kind="reservation", candidates=lambda: [x.life_uuid for x in client.list_schedules()]
    )


_LIFE_COLUMNS = ["life", "type", "resource", "state", "birth", "death"]


@click.group()
def schedule() -> None:
    """Webhook reservations at an absolute time: book, list, show, cancel.

    Times: 'YYYY-MM-DD HH:MM:SS' in the server's SCHEDULE_TIMEZONE, ISO 8601 with an offset,
    or relative to now: +90s, +10m, +2h, +1d.

    \b
    Examples (anyone):
      yoyaku schedule book --at "2030-01-15 09:00:00" --path /api/quotas/reservations/ \\
          --body '{"ttl_seconds": 3600}'
      yoyaku schedule book --birth +1h --death +3h --resource gpu-1 \\
          --path https://hooks.example.org/start --death-path https://hooks.example.org/stop
      yoyaku schedule list --state Inexistent
    Staff only, and only as a term whose death restores the boost:
      yoyaku schedule book --birth +1h --death +3h \\
          --path /api/schedule/tasks/ \\
          --body '{"topic": "quota.boost", "content": {"concurrent": 2}}' \\
          --death-path /api/schedule/tasks/ \\
          --death-body '{"topic": "quota.restore", "content": {"concurrent": 2}}'

    Absolute URLs must be on a host the server allows (SCHEDULE_WEBHOOK_ALLOWED_HOSTS).
    """


@schedule.command("book")
@click.option("--at", "at_time", help="Point booking: when the action runs.")
@click.option("--birth", "birth_time", help="Term booking: when the birth action runs.")
@click.option("--death", "death_time", help="Term booking: when the death action runs.")
@click.option("--resource", "resource_id", default="", help="A resource id (conflict guard).")
@click.option("--path", "path", help="The (birth) action's path or allowed absolute URL.")
@click.option("--method", default="POST", show_default=True, help="The (birth) action's method.")
@click.option("--body", help="The (birth) action's body (JSON, else text).")
@click.option(
    "--header", "headers", multiple=True, help="NAME:VALUE for the action(s); repeatable."
)
@click.option("--death-path", help="Term: the death action's path or URL.")
@click.option("--death-method", default="POST", show_default=True)
@click.option("--death-body", help="Term: the death action's body (JSON, else text).")
@click.option("--retry-count", type=click.IntRange(0, 20), help="Retries of a failed action.")
@click.option("--retry-interval", type=click.FloatRange(min=0), help="Seconds between retries.")
@click.option(
    "--file",
    "booking_file",
    type=click.File("r"),
    help="The whole booking as the API's JSON body (other options then ignored).",
)
@click.option("--life-uuid", help="Your own id (32 hex); generated when not given.")
@json_option
def schedule_book(
    at_time: str | None,
    birth_time: str | None,
    death_time: str | None,
    resource_id: str,
    path: str | None,
    method: str,
    body: str | None,
    headers: tuple[str, ...],
    death_path: str | None,
    death_method: str,
    death_body: str | None,
    retry_count: int | None,
    retry_interval: float | None,
    booking_file: Any,
    life_uuid: str | None,
    as_json: bool,
) -> None:
    """Book a point (--at) or term (--birth and --death) reservation.

    \b
    Examples:
      yoyaku schedule book --at +10m --path /api/quotas/reservations/ \\
          --body '{"ttl_seconds": 600}'
      yoyaku schedule book --at +10m --path https://hooks.example.org/deploy \\
          --body '{"ref": "main"}'
    Staff: a quota boost is a term whose death restores it (see yoyaku schedule --help).
    """
    output = output_for(as_json)
    if booking_file is not None:
        try:
            booking = json.load(booking_file)
        except ValueError as exc:
            raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--file") from exc
        if not isinstance(booking, dict):
            raise click.BadParameter("must be a JSON object", param_hint="--file")
        if life_uuid:
            booking["life_uuid"] = life_uuid
        with open_client(output) as client:
            life = client.book_schedule(booking)
    else:
        if path is None:
            raise click.UsageError("give --path (the action), or --file with the whole booking")
        extra = _headers(headers)

        def action(p: str, m: str, b: str | None, name: str) -> Action:
            return Action(
                path=p,
                method=m,
                headers=extra,
                body=_body_arg(b, name),
                retry_count=retry_count,
                retry_interval=retry_interval,
            )

        with open_client(output) as client:
            if at_time and not (birth_time or death_time):
                life = client.book_point(
                    at=schedule_time_arg(at_time),
                    action=action(path, method, body, "--body"),
                    resource_id=resource_id,
                    life_uuid=life_uuid,
                )
            elif birth_time and death_time and not at_time:
                if death_path is None:
                    raise click.UsageError("a term booking needs --death-path too")
                life = client.book_term(
                    birth_time=schedule_time_arg(birth_time),
                    death_time=schedule_time_arg(death_time),
                    birth=action(path, method, body, "--body"),
                    death=action(death_path, death_method, death_body, "--death-body"),
                    resource_id=resource_id,
                    life_uuid=life_uuid,
                )
            else:
                raise click.UsageError("give --at (point) or both --birth and --death (term)")
    _show_life(output, life, as_json)


def _show_life(output: Output, life: Life, as_json: bool) -> None:
    if as_json:
        output.json(life)
        return
    output.fields(
        f"life {life.life_uuid}",
        [
            ("type", life.schedule_type),
            ("state", life.state),
            ("resource", life.resource_id or None),
            ("birth", life.birth_time),
            ("death", life.death_time),
        ],
    )
    rows = []
    for plan in life.plans:
        last = plan.attempts[-1] if plan.attempts else None
        rows.append(
            [
                plan.kind,
                plan.state,
                plan.time,
                plan.action.get("method"),
                plan.action.get("path"),
                plan.attempts_count,
                None if last is None else (last.status_code or last.error),
            ]
        )
    if rows:
        output.table(None, ["plan", "state", "time", "method", "path", "attempts", "last"], rows)


@schedule.command("list")
@click.option("--state", help="Inexistent, Alive, Dead or Stillbirth.")
@click.option("--resource", "resource_id", help="Only this resource.")
@click.option("--type", "schedule_type", type=click.Choice(["point", "term"]))
@json_option
def schedule_list(
    state: str | None, resource_id: str | None, schedule_type: str | None, as_json: bool
) -> None:
    """Your reservations.

    \b
    Example:
      yoyaku schedule list --state Inexistent
    """
    output = output_for(as_json)
    with open_client(output) as client:
        lives = client.list_schedules(
            state=state, resource_id=resource_id, schedule_type=schedule_type
        )
    if as_json:
        output.json(lives)
    else:
        output.table(None, _LIFE_COLUMNS, _life_rows(lives))


SCHEDULE_COMMANDS: list[IdCommand[Any]] = [
    IdCommand(
        name="show",
        argument="life_uuid",
        resolve=life_id_arg,
        call=Client.get_schedule,
        show=lambda output, life: _show_life(output, life, False),
        help="""One reservation with its plans and their attempts.

        \b
        Example:
          yoyaku schedule show 5f2b7c0e9d8a4b1c8e3f6a7b9c0d1e2f
        """,
    ),
    IdCommand(
        name="cancel",
        argument="life_uuid",
        resolve=life_id_arg,
        call=Client.cancel_schedule,
        show=lambda output, life: _show_life(output, life, False),
        help=(
            "Cancel: before birth nothing runs (Stillbirth); during a term the death action "
            """runs now.

            \b
            Example:
              yoyaku schedule cancel 5f2b7c0e9d8a4b1c8e3f6a7b9c0d1e2f
            """
        ),
    ),
]
for _spec in SCHEDULE_COMMANDS:
    schedule.add_command(id_command(_spec))
