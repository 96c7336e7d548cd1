"""`yoyaku jobs`, `job`, `logs` and `cancel`: your jobs, one job, its output."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import click

from yoyaku_client.cli.common import (
    EXIT_JOB_FAILED,
    EXIT_OK,
    EXIT_TIMEOUT,
    CliExit,
    IdCommand,
    json_option,
    open_client,
    output_for,
)
from yoyaku_client.client import Client, WaitTimeout
from yoyaku_client.ids import resolve_id, shortener
from yoyaku_client.models import Job
from yoyaku_client.output import Output, TerminalStream, fmt, table_time


def follow_job(
    client: Client, output: Output, job_id: str, timeout: float | None
) -> tuple[Job, int]:
    """Follow a job to its end, each new status on stderr: the job and the exit code its end
    means (0 completed, 3 failed or cancelled); past `timeout` seconds, exit 5."""

    def changed(job: Job) -> None:
        output.message(f"job {job.job_id}: {job.status}")

    try:
        final = client.wait_for_job(job_id, timeout=timeout, on_change=changed)
    except WaitTimeout as exc:
        output.error(f"job {job_id} is still {exc.job.status} after {exc.timeout:g} s")
        if output.json_mode:
            output.json(
                {"job_id": job_id, "status": exc.job.status, "job": exc.job, "timeout": True}
            )
        raise CliExit(EXIT_TIMEOUT) from exc
    return final, EXIT_OK if final.status == "completed" else EXIT_JOB_FAILED


def score_cell(job: Job) -> str:
    """A table's score: `0.5`, `0.5 pending` while a reviewer has not decided, `-`."""
    if job.awaiting_review:
        return f"{fmt(job.score)} pending" if job.score is not None else "pending"
    return fmt(job.score)


def _job_rows(jobs: Sequence[Job]) -> list[list[Any]]:
    job_id = shortener(j.job_id for j in jobs)
    submission_id = shortener(j.submission_id for j in jobs)
    return [
        [
            job_id(j.job_id),
            j.status,
            score_cell(j),
            submission_id(j.submission_id),
            table_time(j.created_at),
        ]
        for j in jobs
    ]


# Fits 80 columns: ids are shortened to a unique prefix (any command takes it back), times
# to the minute; `job ID` and --json show everything.
_JOB_COLUMNS = ["job", "status", "score", "submission", "created"]


def job_id_arg(client: Client, given: str) -> str:
    """A job id or a unique prefix of one of your jobs."""
    return resolve_id(given, kind="job", candidates=lambda: [j.job_id for j in client.list_jobs()])


@click.command()
@click.option(
    "--status",
    type=click.Choice(["queued", "running", "completed", "failed", "cancelled"]),
    help="Only jobs in this status.",
)
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@json_option
def jobs(status: str | None, limit: int, as_json: bool) -> None:
    """List your jobs, newest first, with their scores.

    Ids are shortened to a unique prefix: every command takes it back (yoyaku job 3f2a9c0e).
    A score that waits for a reviewer shows as "0.5 pending".

    \b
    Example:
      yoyaku jobs --status running
    """
    output = output_for(as_json)
    with open_client(output) as client:
        found = client.list_jobs(status=status)[:limit]
    if as_json:
        output.json(found)
    else:
        output.table(None, _JOB_COLUMNS, _job_rows(found))


@click.command()
@click.argument("job_id")
@click.option("--wait", is_flag=True, help="Follow the job to its end.")
@click.option(
    "--timeout", type=click.FloatRange(min=0), help="With --wait: give up after S seconds."
)
@json_option
def job(job_id: str, wait: bool, timeout: float | None, as_json: bool) -> None:
    """Show one job (and with --wait, follow it to its end).

    \b
    Example:
      yoyaku job 3f2a9c0e5b7d4e1f8a6b2c9d0e1f2a3b --wait --timeout 600
    """
    output = output_for(as_json)
    code = EXIT_OK
    with open_client(output) as client:
        job_id = job_id_arg(client, job_id)
        found = client.get_job(job_id)
        if wait and not found.finished:
            found, code = follow_job(client, output, job_id, timeout)
        elif wait:
            code = EXIT_OK if found.status == "completed" else EXIT_JOB_FAILED
    if as_json:
        output.json(found)
    else:
        output.fields(
            f"job {found.job_id}",
            [
                ("status", found.status),
                ("score", score_cell(found)),
                ("submission", f"{found.submission_id} ({found.submission_status or '-'})"),
                ("resource class", found.resource_class),
                ("cost", found.cost),
                ("config", found.config),
                ("error", found.error or None),
                ("created", found.created_at),
                ("started", found.started_at),
                ("finished", found.finished_at),
            ],
        )
    if code:
        raise CliExit(code)


@click.command()
@click.argument("job_id")
@click.option("--follow", "-f", is_flag=True, help="Print new output until the job ends.")
@click.option(
    "--interval", type=click.FloatRange(min=0.1), default=1.0, show_default=True, help="Seconds."
)
@click.option(
    "--raw",
    is_flag=True,
    help="Print the output as received, terminal control sequences included.",
)
@json_option
def logs(job_id: str, follow: bool, interval: float, raw: bool, as_json: bool) -> None:
    """Print a job's captured output.

    The program's terminal control sequences (colours, cursor moves, window titles, clipboard
    writes) are shown escaped, ESC as \\x1b, and a carriage return as a line break; --raw
    prints the output exactly as received. With --follow, polls until the job is finished,
    printing what is new; the exit code is then the job's (0 completed, 3 failed or
    cancelled). With --json and --follow, one JSON object per line: {"job_id", "status",
    "logs": <new text>}.

    \b
    Example:
      yoyaku logs 3f2a9c0e5b7d4e1f8a6b2c9d0e1f2a3b --follow
    """
    output = output_for(as_json)
    stream = TerminalStream()

    def show(text: str) -> None:
        output.write(text if raw else stream.feed(text))

    with open_client(output) as client:
        job_id = job_id_arg(client, job_id)
        current = client.job_logs(job_id)
        if not follow:
            if as_json:
                output.json(current)
            else:
                show(current.logs)
                output.write(stream.close())
                if current.error:
                    output.message(f"error: {current.error}")
            return
        printed = ""
        status = ""
        while True:
            text = current.logs
            if text.startswith(printed):
                new = text[len(printed) :]
            else:  # the server capped or rewrote the output: show it again whole
                new = text
                output.write(stream.close())
                output.message("[output restarted]")
            if new or current.status != status:
                if as_json:
                    output.json_line({"job_id": job_id, "status": current.status, "logs": new})
                elif new:
                    show(new)
            printed, status = text, current.status
            if current.status in ("completed", "failed", "cancelled"):
                break
            time.sleep(interval)
            current = client.job_logs(job_id)
    output.write(stream.close())
    if current.error:
        output.message(f"error: {current.error}")
    output.message(f"job {job_id}: {current.status}")
    if current.status != "completed":
        raise CliExit(EXIT_JOB_FAILED)


JOB_COMMANDS: list[IdCommand[Any]] = [
    IdCommand(
        name="cancel",
        argument="job_id",
        resolve=job_id_arg,
        call=Client.cancel_job,
        show=lambda output, found: output.print(f"job {found.job_id}: {found.status}"),
        help="""Cancel a queued or running job (again: fine).

        \b
        Example:
          yoyaku cancel 3f2a9c0e5b7d4e1f8a6b2c9d0e1f2a3b
        """,
    ),
]
