"""The `yoyaku` command.

Exit codes: 0 success, 1 error, 2 usage, 3 job failed or cancelled, 4 quota or cost
limit, 5 `--wait` timed out. Every command takes `--json` (after the command's name): one
JSON document on stdout, messages and progress on stderr.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from yoyaku_client import __version__
from yoyaku_client.client import Action, Client, WaitTimeout
from yoyaku_client.config import config_path, load_settings, save_settings
from yoyaku_client.errors import (
    QUOTA_CODES,
    AmbiguousRequestError,
    ApiError,
    TransportError,
    YoyakuError,
)
from yoyaku_client.ids import IdError, resolve_id, shortener
from yoyaku_client.models import Job, Life, Reservation, to_jsonable
from yoyaku_client.output import (
    LineReporter,
    Output,
    ProgressReporter,
    QuietReporter,
    TerminalStream,
    fmt,
    size,
    table_time,
    terminal_console,
)
from yoyaku_client.submit import (
    RETRY_STATUSES,
    LocalRefusal,
    Reporter,
    SubmitOptions,
    Submitter,
)
from yoyaku_client.tokens import TOKEN_SCOPES, token_name_default
from yoyaku_client.transport import RetryEvent, RetryPolicy

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_JOB_FAILED = 3
EXIT_QUOTA = 4
EXIT_TIMEOUT = 5

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CODES_HELP = """\b
Exit codes:
  0  success
  1  error (the server's message is printed)
  2  usage (bad option or argument)
  3  the job failed or was cancelled
  4  quota, rate, cost or storage limit (never retried)
  5  --wait ran out of --timeout
"""


class CliExit(Exception):
    """Leave with `code` after the command printed what it had to."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class _State:
    json_mode = False


def _set_json(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        _State.json_mode = True
    return value


def json_option(func: F) -> F:
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        callback=_set_json,
        expose_value=True,
        help="Print one JSON document on stdout (messages go to stderr).",
    )(func)


def _output(as_json: bool) -> Output:
    return Output(json_mode=as_json)


def _retry_policy() -> RetryPolicy:
    def number(name: str, default: float) -> float:
        raw = os.environ.get(name)
        try:
            return float(raw) if raw else default
        except ValueError:
            raise click.UsageError(f"{name} must be a number, not {raw!r}") from None

    return RetryPolicy(
        max_attempts=1 + int(number("YOYAKU_RETRIES", 3)),
        base_delay=number("YOYAKU_RETRY_DELAY", 0.5),
        max_delay=number("YOYAKU_RETRY_MAX_DELAY", 8.0),
    )


def _client(output: Output, *, need_token: bool = True) -> Client:
    settings = load_settings()
    if need_token and not settings.token:
        output.error(
            "not logged in: run `yoyaku login --url URL --token TOKEN` or set YOYAKU_TOKEN"
        )
        raise CliExit(EXIT_ERROR)

    def on_retry(event: RetryEvent) -> None:
        output.note(
            f"retrying {event.method} /api{event.path} (attempt {event.attempt}/"
            f"{event.max_attempts}) in {event.delay:.1f} s: {event.reason}",
            style="dim",
        )

    timeout = os.environ.get("YOYAKU_TIMEOUT")
    return Client(
        settings.url,
        settings.token,
        retry=_retry_policy(),
        on_retry=on_retry,
        timeout=float(timeout) if timeout else None,
    )


def _json_arg(value: str | None, name: str) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        data = json.loads(value)
    except ValueError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint=name) from exc
    if not isinstance(data, dict):
        raise click.BadParameter("must be a JSON object", param_hint=name)
    return data


# --- the group -----------------------------------------------------------------------------------


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EXIT_CODES_HELP,
)
@click.version_option(__version__, prog_name="yoyaku")
def cli() -> None:
    """Submit to a Yoyaku server from a terminal or CI.

    \b
    Quick start:
      yoyaku login --url http://127.0.0.1:8000 --token <token>
      yoyaku submit examples/hello --wait

    Settings come from YOYAKU_URL / YOYAKU_TOKEN, else from the file `yoyaku login` writes.
    Add --json after any command for machine-readable output.
    """


# --- account -------------------------------------------------------------------------------------


@cli.command()
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
    output = _output(as_json)
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
        with Client(url, retry=_retry_policy()) as client:
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
    with Client(url, token, retry=_retry_policy()) as client:
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


@cli.command()
@json_option
def whoami(as_json: bool) -> None:
    """Show who the token belongs to, and where the settings came from.

    \b
    Example:
      yoyaku whoami --json
    """
    output = _output(as_json)
    settings = load_settings()
    with _client(output) as client:
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


# --- submit --------------------------------------------------------------------------------------


def _reporter(output: Output, progress: bool | None) -> Reporter:
    """Bars on a terminal (or everywhere with --progress: drawn for a terminal even into a
    file or pipe); lines otherwise; with --json only warnings."""
    if progress:
        return ProgressReporter(output, terminal_console(sys.stderr))
    if progress is None and sys.stderr.isatty():
        return ProgressReporter(output)
    if output.json_mode:
        return QuietReporter(output)
    return LineReporter(output)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--entrypoint", default="main.py", show_default=True, help="The program to run.")
@click.option(
    "--config-file", default="config.yaml", show_default=True, help="Its configuration file."
)
@click.option("--question", "question_id", default="", help="Question (leaderboard) id.")
@click.option("--skill", default="", help="Skill (leaderboard) name.")
@click.option("--metadata", help="Submission metadata, a JSON object.")
@click.option(
    "--resource-class",
    type=click.Choice(["small", "medium", "large"]),
    help="The job's resource class (its cost); the server's default when not given.",
)
@click.option("--job-config", help="The job's whole configuration, a JSON object.")
@click.option(
    "--reserve",
    is_flag=True,
    help="Hold a quota slot while uploading, so a long upload cannot end in a quota refusal.",
)
@click.option(
    "--reserve-ttl",
    default=300,
    show_default=True,
    type=click.IntRange(10, 3600),
    help="Seconds the slot is held between extensions.",
)
@click.option(
    "--idempotency-key",
    help="One key for the job, e.g. ci-$GITHUB_SHA (default: derived from you, the files' "
    "hashes and the configuration).",
)
@click.option(
    "--retry",
    is_flag=True,
    help="When these files (or this key) already ran and the job failed or was cancelled, run "
    "them again as a new job (running the same --retry command again finds that one job).",
)
@click.option("--wait", is_flag=True, help="Follow the job to its end.")
@click.option(
    "--timeout", type=click.FloatRange(min=0), help="With --wait: give up after S seconds."
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress bars (default: when stderr is a terminal).",
)
@click.option(
    "--skip-local-checks",
    is_flag=True,
    help="Send even what the client would refuse (the server then judges).",
)
@json_option
def submit(
    paths: tuple[Path, ...],
    entrypoint: str,
    config_file: str,
    question_id: str,
    skill: str,
    metadata: str | None,
    resource_class: str | None,
    job_config: str | None,
    reserve: bool,
    reserve_ttl: int,
    idempotency_key: str | None,
    retry: bool,
    wait: bool,
    timeout: float | None,
    progress: bool | None,
    skip_local_checks: bool,
    as_json: bool,
) -> None:
    """Upload files (one per request) and enqueue one job.

    A folder is walked (files with an allowed extension: .py .yaml .zip .tar.gz). Running
    the same command again continues an interrupted upload, and never makes a second job:
    the idempotency key is derived from you, the files and the configuration.

    When these files already ran and their job failed or was cancelled, the command says so
    and exits 3 without a new job: add --retry to run them again.

    \b
    Examples:
      yoyaku submit examples/hello --wait
      yoyaku submit examples/hello --wait --retry
      yoyaku submit main.py config.yaml data.zip --question q1 --reserve
      yoyaku submit . --idempotency-key "ci-$GITHUB_SHA" --wait --timeout 900 --json
    """
    output = _output(as_json)
    config = _json_arg(job_config, "--job-config")
    if resource_class:
        config = {**(config or {}), "resource_class": resource_class}
    options = SubmitOptions(
        paths=list(paths),
        entrypoint=entrypoint,
        config_file=config_file,
        question_id=question_id,
        skill=skill,
        metadata=_json_arg(metadata, "--metadata") or {},
        job_config=config,
        idempotency_key=idempotency_key,
        reserve=reserve,
        reserve_ttl=reserve_ttl,
        local_checks=not skip_local_checks,
        retry=retry,
    )
    reporter = _reporter(output, progress)
    try:
        with _client(output) as client:
            result = Submitter(client, reporter).run(options)
            reporter.close()
            job = result.job
            uploaded = sum(1 for f in result.files if f.action != "already stored")
            code = EXIT_OK
            if result.matched_existing and job.status in RETRY_STATUSES:
                output.message(
                    f"This exact submission already ran: job {job.job_id} was {job.status} "
                    f"(submission {result.submission_id}, idempotency key "
                    f"{result.idempotency_key}). No new job was made; run the same command "
                    "with --retry to run it again."
                )
                code = EXIT_JOB_FAILED
            elif result.matched_existing:
                output.message(
                    f"Matched existing job {job.job_id} ({job.status}) of submission "
                    f"{result.submission_id}: idempotency key {result.idempotency_key}"
                )
            else:
                output.message(
                    f"Submission {result.submission_id}: {len(result.files)} files "
                    f"({uploaded} sent now, {len(result.files) - uploaded} already stored)"
                )
                note = " (a retry confirmed it after a lost answer)" if job.idempotent_hit else ""
                if result.retried:
                    note += f", a retry of job {result.retried[-1]}"
                output.message(f"Created job {job.job_id} ({job.status}){note}")
            for warning in job.quota_warnings:
                output.warning(warning)
            if job.cost_limit_warning:
                output.warning(f"Cost: {job.cost_limit_warning}")
            for path in result.left_out:
                output.message(f"left out (extension not allowed): {path}")
            document: dict[str, Any] = {
                "submission_id": result.submission_id,
                "job_id": job.job_id,
                "status": job.status,
                "idempotent_hit": job.idempotent_hit,
                "matched_existing": result.matched_existing,
                "resumed": result.resumed,
                "idempotency_key": result.idempotency_key,
                "reservation_id": result.reservation_id,
                "quota_warnings": job.quota_warnings,
                "cost_limit_warning": job.cost_limit_warning,
                "files": result.files,
                "left_out": result.left_out,
                "retried": result.retried,
            }
            if wait and code == EXIT_OK:
                final, code = _follow(client, output, job.job_id, timeout)
                submission = client.get_submission(result.submission_id)
                document.update(
                    status=final.status,
                    job=final,
                    score=submission.score,
                    submission_status=submission.status,
                )
                _print_outcome(output, final, submission.score, submission.status)
            if as_json:
                output.json(document)
            elif not wait or code:
                output.print(job.job_id)
    finally:
        reporter.close()
    if code:
        raise CliExit(code)


def _follow(client: Client, output: Output, job_id: str, timeout: float | None) -> tuple[Job, int]:
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


def outcome_line(status: str, score: float | None, submission_status: str) -> str:
    """What `submit --wait` prints on stdout: `completed 1`, `failed -`, and for a grading
    whose score waits for a reviewer `completed, awaiting review (score 0.5 pending)`."""
    if status == "completed" and submission_status == "review_pending":
        pending = "" if score is None else f" (score {fmt(score)} pending)"
        return f"completed, awaiting review{pending}"
    return f"{status} {fmt(score)}"


def score_cell(job: Job) -> str:
    """A table's score: `0.5`, `0.5 pending` while a reviewer has not decided, `-`."""
    if job.awaiting_review:
        return f"{fmt(job.score)} pending" if job.score is not None else "pending"
    return fmt(job.score)


def _print_outcome(output: Output, job: Job, score: float | None, submission_status: str) -> None:
    if job.status == "completed":
        if submission_status == "review_pending":
            output.message(
                f"Job {job.job_id} completed: the submission awaits a human review; its score "
                "counts once a reviewer approves it"
            )
        else:
            output.message(f"Job {job.job_id} completed: score {fmt(score)}")
    else:
        reason = f": {job.error}" if job.error else ""
        output.message(f"Job {job.job_id} {job.status}{reason}")
    if not output.json_mode:
        output.print(outcome_line(job.status, score, submission_status))


# --- jobs ----------------------------------------------------------------------------------------


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


@cli.command()
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
    output = _output(as_json)
    with _client(output) as client:
        found = client.list_jobs(status=status)[:limit]
    if as_json:
        output.json(found)
    else:
        output.table(None, _JOB_COLUMNS, _job_rows(found))


@cli.command()
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
    output = _output(as_json)
    code = EXIT_OK
    with _client(output) as client:
        job_id = job_id_arg(client, job_id)
        found = client.get_job(job_id)
        if wait and not found.finished:
            found, code = _follow(client, output, job_id, timeout)
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


@cli.command()
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
    output = _output(as_json)
    stream = TerminalStream()

    def show(text: str) -> None:
        output.write(text if raw else stream.feed(text))

    with _client(output) as client:
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


@cli.command()
@click.argument("job_id")
@json_option
def cancel(job_id: str, as_json: bool) -> None:
    """Cancel a queued or running job (again: fine).

    \b
    Example:
      yoyaku cancel 3f2a9c0e5b7d4e1f8a6b2c9d0e1f2a3b
    """
    output = _output(as_json)
    with _client(output) as client:
        found = client.cancel_job(job_id_arg(client, job_id))
    if as_json:
        output.json(found)
    else:
        output.print(f"job {found.job_id}: {found.status}")


# --- quotas --------------------------------------------------------------------------------------


def _reservation_rows(reservations: Sequence[Reservation]) -> list[list[Any]]:
    short = shortener([r.reservation_id for r in reservations] + [r.job_id for r in reservations])
    return [
        [short(r.reservation_id), r.state, table_time(r.expires_at), short(r.job_id) or None]
        for r in reservations
    ]


@cli.command()
@json_option
def quota(as_json: bool) -> None:
    """Show your limits, what you use now, and your reservations.

    \b
    Example:
      yoyaku quota
    """
    output = _output(as_json)
    with _client(output) as client:
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


@cli.command()
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
    output = _output(as_json)
    with _client(output) as client:
        reservation = client.reserve(ttl_seconds=ttl)
    if as_json:
        output.json(reservation)
    else:
        output.print(
            f"reservation {reservation.reservation_id}: {reservation.state} until "
            f"{fmt(reservation.expires_at)}"
        )


@cli.command()
@click.argument("reservation_id")
@json_option
def release(reservation_id: str, as_json: bool) -> None:
    """Release a reservation (again: fine).

    \b
    Example:
      yoyaku release 0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a
    """
    output = _output(as_json)
    with _client(output) as client:
        reservation_id = resolve_id(
            reservation_id,
            kind="reservation",
            candidates=lambda: [r.reservation_id for r in client.list_reservations()],
        )
        reservation = client.release_reservation(reservation_id)
    if as_json:
        output.json(reservation)
    else:
        output.print(f"reservation {reservation.reservation_id}: {reservation.state}")


# --- leaderboard and review ----------------------------------------------------------------------


@cli.command()
@click.option(
    "--question", "question_id", help="This question's board (default: one board per question)."
)
@click.option("--skill", help="Only this skill.")
@click.option(
    "--limit",
    type=click.IntRange(1, 1000),
    help="At most this many rows (default: 100 for one question, 10 per board without one).",
)
@json_option
def leaderboard(
    question_id: str | None, skill: str | None, limit: int | None, as_json: bool
) -> None:
    """Best completed score per user, ranked, for each question on its own (no login needed
    while it is public).

    Without --question: one board per question (its top 10; `yoyaku questions` lists them),
    and --json gives [{"question_id", "skills", "users", "best_score", "rows": [...]}]. With
    --question: that board, and --json gives its rows. Submissions sent without a question
    are ranked together as the question "" (--question "").

    \b
    Examples:
      yoyaku leaderboard
      yoyaku leaderboard --question q1 --skill reading
    """
    output = _output(as_json)
    with _client(output, need_token=False) as client:
        if question_id is not None:
            rows = client.leaderboard(question_id=question_id, skill=skill, limit=limit)
            if as_json:
                output.json(rows)
            else:
                _leaderboard_table(output, None, rows)
            return
        questions = client.leaderboard_questions()
        if skill is not None:
            questions = [q for q in questions if skill in q.skills]
        boards = [
            (q, client.leaderboard(question_id=q.question_id, skill=skill, limit=limit or 10))
            for q in questions
        ]
    if as_json:
        output.json([{**to_jsonable(q), "rows": rows} for q, rows in boards])
        return
    if not boards:
        output.message("No scored submission yet: nothing is ranked.")
    for q, rows in boards:
        name = f"question {q.question_id}" if q.question_id else "no question"
        skills = ", ".join(x or "-" for x in q.skills)
        _leaderboard_table(output, f"{name} (skills: {skills}; {q.users} ranked)", rows)


def _leaderboard_table(output: Output, title: str | None, rows: Sequence[Any]) -> None:
    short = shortener(r.submission_id for r in rows)
    output.table(
        title,
        ["rank", "user", "score", "submission", "completed"],
        [
            [r.rank, r.user.username, r.score, short(r.submission_id), table_time(r.completed_at)]
            for r in rows
        ],
    )


@cli.group()
def review() -> None:
    """Human review (reviewers): queue, claim, extend, release, complete; regrade (staff).

    \b
    Example:
      yoyaku review queue
      yoyaku review claim <submission>
      yoyaku review complete <submission> --approve --score 0.9 --comment "checked"
    """


def _queued_id(client: Client, given: str) -> str:
    """A submission id, or a unique prefix of one in the review queue."""
    return resolve_id(
        given,
        kind="submission awaiting review",
        candidates=lambda: [r.submission_id for r in client.review_queue(limit=500)],
    )


@review.command("queue")
@click.option("--limit", type=click.IntRange(1, 500), help="At most this many rows.")
@json_option
def review_queue(limit: int | None, as_json: bool) -> None:
    """Submissions awaiting review: unclaimed or expired first, then oldest first.

    \b
    Example:
      yoyaku review queue --json
    """
    output = _output(as_json)
    with _client(output) as client:
        rows = client.review_queue(limit=limit)
    if as_json:
        output.json(rows)
        return
    short = shortener(r.submission_id for r in rows)
    output.table(
        None,
        ["submission", "owner", "question", "skill", "score", "claimed by", "claim expires"],
        [
            [
                short(r.submission_id),
                r.owner.username if r.owner else None,
                r.question_id,
                r.skill,
                r.score,
                r.claimed_by.username if r.claimed_by else None,
                table_time(r.claim_expires_at) if r.claim_expires_at else None,
            ]
            for r in rows
        ],
    )


@review.command("claim")
@click.argument("submission_id")
@json_option
def review_claim(submission_id: str, as_json: bool) -> None:
    """Claim a submission for review (yours already: extended).

    \b
    Example:
      yoyaku review claim 5f2b7c0e9d8a4b1c8e3f6a7b9c0d1e2f
    """
    output = _output(as_json)
    with _client(output) as client:
        claim = client.claim_review(_queued_id(client, submission_id))
    if as_json:
        output.json(claim)
    else:
        output.print(f"claimed {claim.submission_id} until {fmt(claim.claim_expires_at)}")


@review.command("extend")
@click.argument("submission_id")
@json_option
def review_extend(submission_id: str, as_json: bool) -> None:
    """Renew your live claim.

    \b
    Example:
      yoyaku review extend 5f2b7c0e9d8a4b1c8e3f6a7b9c0d1e2f
    """
    output = _output(as_json)
    with _client(output) as client:
        claim = client.extend_review_claim(_queued_id(client, submission_id))
    if as_json:
        output.json(claim)
    else:
        output.print(f"claimed {claim.submission_id} until {fmt(claim.claim_expires_at)}")


@review.command("release")
@click.argument("submission_id")
@json_option
def review_release(submission_id: str, as_json: bool) -> None:
    """Give up your claim.

    \b
    Example:
      yoyaku review release 5f2b7c0e9d8a4b1c8e3f6a7b9c0d1e2f
    """
    output = _output(as_json)
    with _client(output) as client:
        result = client.release_review_claim(_queued_id(client, submission_id))
    if as_json:
        output.json(result)
    else:
        output.print(f"{result.submission_id}: {'released' if result.released else 'no claim'}")


@review.command("complete")
@click.argument("submission_id")
@click.option("--approve", "verdict", flag_value="approve", help="Accept (completed).")
@click.option("--reject", "verdict", flag_value="reject", help="Refuse (failed).")
@click.option("--score", type=float, help="Your score (approve; else the grader's stays).")
@click.option("--comment", default="", help="Why.")
@json_option
def review_complete(
    submission_id: str, verdict: str | None, score: float | None, comment: str, as_json: bool
) -> None:
    """Record your verdict on a submission you claimed.

    \b
    Example:
      yoyaku review complete 5f2b7c0e9d8a4b1c8e3f6a7b9c0d1e2f --approve --score 0.8
    """
    if verdict is None:
        raise click.UsageError("give --approve or --reject")
    output = _output(as_json)
    with _client(output) as client:
        outcome = client.complete_review(
            _queued_id(client, submission_id), verdict=verdict, score=score, comment=comment
        )
    if as_json:
        output.json(outcome)
    else:
        output.print(f"{outcome.submission_id}: {outcome.status} (score {fmt(outcome.score)})")


@review.command("regrade")
@click.argument("submission_id")
@json_option
def review_regrade(submission_id: str, as_json: bool) -> None:
    """Staff: grade a finished submission again (a new job, no quota charged).

    \b
    Example:
      yoyaku review regrade 5f2b7c0e9d8a4b1c8e3f6a7b9c0d1e2f
    """
    output = _output(as_json)
    with _client(output) as client:
        result = client.regrade(resolve_id(submission_id, kind="submission"))
    if as_json:
        output.json(result)
    else:
        output.print(f"{result.submission_id}: {result.status}, job {result.job_id}")


# --- schedule ------------------------------------------------------------------------------------


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


@cli.group()
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
    output = _output(as_json)
    if booking_file is not None:
        try:
            booking = json.load(booking_file)
        except ValueError as exc:
            raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--file") from exc
        if not isinstance(booking, dict):
            raise click.BadParameter("must be a JSON object", param_hint="--file")
        if life_uuid:
            booking["life_uuid"] = life_uuid
        with _client(output) as client:
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

        with _client(output) as client:
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
    output = _output(as_json)
    with _client(output) as client:
        lives = client.list_schedules(
            state=state, resource_id=resource_id, schedule_type=schedule_type
        )
    if as_json:
        output.json(lives)
    else:
        output.table(None, _LIFE_COLUMNS, _life_rows(lives))


@schedule.command("show")
@click.argument("life_uuid")
@json_option
def schedule_show(life_uuid: str, as_json: bool) -> None:
    """One reservation with its plans and their attempts.

    \b
    Example:
      yoyaku schedule show 5f2b7c0e9d8a4b1c8e3f6a7b9c0d1e2f
    """
    output = _output(as_json)
    with _client(output) as client:
        life = client.get_schedule(life_id_arg(client, life_uuid))
    _show_life(output, life, as_json)


@schedule.command("cancel")
@click.argument("life_uuid")
@json_option
def schedule_cancel(life_uuid: str, as_json: bool) -> None:
    """Cancel: before birth nothing runs (Stillbirth); during a term the death action runs now.

    \b
    Example:
      yoyaku schedule cancel 5f2b7c0e9d8a4b1c8e3f6a7b9c0d1e2f
    """
    output = _output(as_json)
    with _client(output) as client:
        life = client.cancel_schedule(life_id_arg(client, life_uuid))
    _show_life(output, life, as_json)


# --- entry point ---------------------------------------------------------------------------------


def _fail(output: Output, code: int, message: str, document: dict[str, Any]) -> NoReturn:
    output.error(message)
    if output.json_mode:
        output.json(document)
    sys.exit(code)


from yoyaku_client.cli_browse import questions, submissions  # noqa: E402
from yoyaku_client.cli_tokens import token  # noqa: E402 - the group above must exist first

cli.add_command(token)
cli.add_command(submissions)
cli.add_command(questions)


def main(argv: Sequence[str] | None = None) -> None:
    """The console script: run the command, turn errors into the documented exit codes."""
    _State.json_mode = False
    output = Output()
    try:
        cli.main(
            args=list(argv) if argv is not None else None, prog_name="yoyaku", standalone_mode=False
        )
    except CliExit as exc:
        sys.exit(exc.code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):  # click turns Ctrl-C into Abort
        output.error("interrupted; run the same command again to continue")
        sys.exit(130)
    except LocalRefusal as exc:
        output.json_mode = _State.json_mode
        problems = "\n  ".join(exc.problems)
        _fail(
            output,
            EXIT_ERROR,
            f"refused before sending anything:\n  {problems}",
            {
                "success": False,
                "code": "refused_locally",
                "error": str(exc),
                "problems": exc.problems,
            },
        )
    except IdError as exc:
        output.json_mode = _State.json_mode
        _fail(output, EXIT_USAGE if exc.usage else EXIT_ERROR, str(exc), exc.to_dict())
    except ApiError as exc:
        output.json_mode = _State.json_mode
        code = EXIT_QUOTA if exc.code in QUOTA_CODES else EXIT_ERROR
        details = "".join(f"\n  {name}: {'; '.join(msgs)}" for name, msgs in exc.fields.items())
        _fail(output, code, f"{exc.error} ({exc.code}, HTTP {exc.status}){details}", exc.to_dict())
    except TransportError as exc:
        output.json_mode = _State.json_mode
        _fail(
            output,
            EXIT_ERROR,
            str(exc),
            {
                "success": False,
                "code": (
                    "ambiguous"
                    if isinstance(exc, AmbiguousRequestError)
                    else "no_answer"
                    if exc.sent
                    else "unreachable"
                ),
                "error": str(exc),
                "attempts": exc.attempts,
            },
        )
    except YoyakuError as exc:
        output.json_mode = _State.json_mode
        _fail(output, EXIT_ERROR, str(exc), {"success": False, "code": "error", "error": str(exc)})
    except OSError as exc:  # a local file vanished or could not be read, the config folder...
        output.json_mode = _State.json_mode
        _fail(
            output, EXIT_ERROR, str(exc), {"success": False, "code": "os_error", "error": str(exc)}
        )
    sys.exit(EXIT_OK)


from yoyaku_client.cli_files import download, review_show  # noqa: E402

cli.add_command(download)
review.add_command(review_show)
