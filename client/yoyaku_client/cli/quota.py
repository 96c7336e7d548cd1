"""`yoyaku quota`, `reserve` and `release`: your limits and concurrent-job slots."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from yoyaku_client.cli.common import IdCommand, json_option, open_client, output_for
from yoyaku_client.client import Client
from yoyaku_client.ids import resolve_id, shortener
from yoyaku_client.models import Reservation, to_jsonable
from yoyaku_client.output import fmt, size, table_time


def _reservation_rows(reservations: Sequence[Reservation]) -> list[list[Any]]:
    short = shortener([r.reservation_id for r in reservations] + [r.job_id for r in reservations])
    return [
        [short(r.reservation_id), r.state, table_time(r.expires_at), short(r.job_id) or None]
        for r in reservations
    ]


@click.command()
@json_option
def quota(as_json: bool) -> None:
    """Show your limits, what you use now, and your reservations.

    \b
    Example:
      yoyaku quota
    """
    output = output_for(as_json)
    with open_client(output) as client:
        current = client.quota()
        reservations = client.list_reservations()
    if as_json:
        output.json({**to_jsonable(current), "reservations": reservations})
        return
    cost_limit = "none" if current.monthly_cost_limit is None else fmt(current.monthly_cost_limit)
    storage = "-"
    if current.storage_bytes is not None and current.max_storage_bytes is not None:
        storage = f"{size(current.storage_bytes)} of {size(current.max_storage_bytes)}"
    output.fields(
        "quota",
        [
            (
                "concurrent jobs",
                f"{current.active_jobs} running + {current.active_reservations} reserved of "
                f"{current.max_concurrent_jobs} ({current.available_slots} free)",
            ),
            ("jobs in the last 24 h", f"{current.jobs_last_24h} of {current.max_jobs_per_day}"),
            ("cost this month", f"{fmt(current.cost_this_month)} of {cost_limit}"),
            ("storage", storage),
        ],
    )
    for warning in current.warnings:
        output.warning(warning)
    active = [r for r in reservations if r.state == "active"]
    if active:
        output.table(
            "active reservations",
            ["reservation", "state", "expires", "job"],
            _reservation_rows(active),
        )


@click.command()
@click.option(
    "--ttl", type=click.IntRange(10, 3600), help="Seconds to hold the slot (server default 300)."
)
@json_option
def reserve(ttl: int | None, as_json: bool) -> None:
    """Hold a concurrent-job slot (e.g. before a long upload); `yoyaku release` frees it.

    \b
    Example:
      yoyaku reserve --ttl 600
    """
    output = output_for(as_json)
    with open_client(output) as client:
        reservation = client.reserve(ttl_seconds=ttl)
    if as_json:
        output.json(reservation)
    else:
        output.print(
            f"reservation {reservation.reservation_id}: {reservation.state} until "
            f"{fmt(reservation.expires_at)}"
        )


def reservation_id_arg(client: Client, given: str) -> str:
    """A reservation id or a unique prefix of one of yours."""
    return resolve_id(
        given,
        kind="reservation",
        candidates=lambda: [r.reservation_id for r in client.list_reservations()],
    )


QUOTA_COMMANDS: list[IdCommand[Any]] = [
    IdCommand(
        name="release",
        argument="reservation_id",
        resolve=reservation_id_arg,
        call=Client.release_reservation,
        show=lambda output, found: output.print(
            f"reservation {found.reservation_id}: {found.state}"
        ),
        help="""Release a reservation (again: fine).

        \b
        Example:
          yoyaku release 0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a
        """,
    ),
]
