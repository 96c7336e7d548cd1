"""`yoyaku rescore --challenge SLUG --phase P [--wait]`: a phase's rescore in a new scoring
version (hosts): how many submissions are scored, failed, in all; with --wait, a progress bar
(one line per change when stderr is not a terminal) until it switches or stops."""

from __future__ import annotations

import time
from typing import Any

import click

from yoyaku_client.cli.common import (
    EXIT_TIMEOUT,
    CliExit,
    json_option,
    open_client,
    output_for,
)
from yoyaku_client.client import Client
from yoyaku_client.output import Output

RUNNING = "running"


def _line(found: dict[str, Any]) -> str:
    return (
        f"version {found.get('version')}: {found.get('state')}, {found.get('done')} done, "
        f"{found.get('failed')} failed of {found.get('total')}"
        f" (the leaderboard serves version {found.get('scoring_version')})"
    )


def _follow(
    client: Client,
    output: Output,
    slug: str,
    phase: str,
    found: dict[str, Any],
    *,
    interval: float,
    timeout: float | None,
) -> dict[str, Any]:
    """Poll until the rescore is no longer running; past `timeout` seconds, exit 5."""
    deadline = None if timeout is None else time.monotonic() + timeout
    bar = None
    if not output.json_mode and output.err.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        bar = Progress(
            TextColumn("rescore v{task.fields[version]}", markup=False),
            BarColumn(bar_width=None),
            MofNCompleteColumn(),
            TextColumn("{task.fields[failed]} failed", markup=False),
            console=output.err,
        )
        bar.start()
    task = None
    last: tuple[Any, ...] = ()
    try:
        while True:
            settled = int(found.get("done") or 0) + int(found.get("failed") or 0)
            if bar is not None:
                version, failed = found.get("version"), found.get("failed")
                total = found.get("total") or 0
                if task is None:
                    task = bar.add_task("rescore", total=total, version=version, failed=failed)
                bar.update(task, completed=settled, total=total, version=version, failed=failed)
            elif not output.json_mode:
                now = (found.get("state"), found.get("done"), found.get("failed"))
                if now != last:
                    output.message(_line(found))
                    last = now
            if found.get("state") != RUNNING:
                return found
            if deadline is not None and time.monotonic() >= deadline:
                output.error(f"the rescore is still running after {timeout:g} s")
                if output.json_mode:
                    output.json({**found, "timeout": True})
                raise CliExit(EXIT_TIMEOUT)
            time.sleep(interval)
            found = client.phase_rescore(slug, phase)
    finally:
        if bar is not None:
            bar.stop()


@click.command()
@click.option("--challenge", "slug", required=True, help="The challenge's slug.")
@click.option("--phase", required=True, help="The phase's slug.")
@click.option("--wait", is_flag=True, help="Follow the rescore until it switches or stops.")
@click.option(
    "--timeout", type=click.FloatRange(min=0), help="With --wait: give up after S seconds."
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=2.0,
    show_default=True,
    help="With --wait: seconds between polls.",
)
@json_option
def rescore(
    slug: str, phase: str, wait: bool, timeout: float | None, interval: float, as_json: bool
) -> None:
    """Show the phase's rescore in its newest scoring version (hosts): done, failed, total.

    The leaderboard keeps serving the previous version until every submission is scored (or
    failed) in the new one, then switches at once.

    \b
    Examples:
      yoyaku rescore --challenge digits --phase dev
      yoyaku rescore --challenge digits --phase dev --wait --json
    """
    output = output_for(as_json)
    with open_client(output) as client:
        found = client.phase_rescore(slug, phase)
        if wait:
            found = _follow(client, output, slug, phase, found, interval=interval, timeout=timeout)
    if as_json:
        output.json(found)
    else:
        output.message(_line(found))
