"""The `yoyaku` command: the group, one module per command group, and `main`.

Exit codes: 0 success, 1 error, 2 usage, 3 job failed or cancelled, 4 quota or cost
limit, 5 `--wait` timed out. Every command takes `--json` (after the command's name): one
JSON document on stdout, messages and progress on stderr.

    account.py      login, whoami
    submit.py       submit
    jobs.py         jobs, job, logs, cancel
    quota.py        quota, reserve, release
    leaderboard.py  leaderboard, questions
    submissions.py  submissions
    files.py        download, review show
    review.py       review queue|claim|extend|release|complete|regrade
    schedule.py     schedule book|list|show|cancel
    tokens.py       token list|create|revoke
    challenges.py   challenges, challenge show|push
    teams.py        team create|join|show, final select|unselect

The commands that take one id, make one call and print its answer are lines of a table
(`JOB_COMMANDS`, `QUOTA_COMMANDS`, `REVIEW_COMMANDS`, `SCHEDULE_COMMANDS`; see
`common.id_command`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from yoyaku_client import __version__
from yoyaku_client.cli.account import login, whoami
from yoyaku_client.cli.challenges import challenge, challenges
from yoyaku_client.cli.common import (
    EXIT_CODES_HELP,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_QUOTA,
    EXIT_USAGE,
    CliExit,
    State,
    id_command,
)
from yoyaku_client.cli.files import download, review_show
from yoyaku_client.cli.jobs import JOB_COMMANDS, job, jobs, logs
from yoyaku_client.cli.leaderboard import leaderboard, questions
from yoyaku_client.cli.quota import QUOTA_COMMANDS, quota, reserve
from yoyaku_client.cli.rescore import rescore
from yoyaku_client.cli.review import review
from yoyaku_client.cli.schedule import schedule
from yoyaku_client.cli.submissions import submissions
from yoyaku_client.cli.submit import submit
from yoyaku_client.cli.teams import final, team
from yoyaku_client.cli.tokens import token
from yoyaku_client.errors import (
    QUOTA_CODES,
    AmbiguousRequestError,
    ApiError,
    TransportError,
    YoyakuError,
)
from yoyaku_client.ids import IdError
from yoyaku_client.output import Output
from yoyaku_client.submit import LocalRefusal

__all__ = ["cli", "main"]


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


for _command in (login, whoami, submit, jobs, job, logs, quota, reserve, leaderboard, questions):
    cli.add_command(_command)
for _command in (submissions, download, review, schedule, token):
    cli.add_command(_command)
for _command in (challenges, challenge, team, final, rescore):
    cli.add_command(_command)
for _spec in (*JOB_COMMANDS, *QUOTA_COMMANDS):
    cli.add_command(id_command(_spec))
review.add_command(review_show)


def _fail(output: Output, code: int, message: str, document: dict[str, Any]) -> NoReturn:
    output.error(message)
    if output.json_mode:
        output.json(document)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> None:
    """The console script: run the command, turn errors into the documented exit codes.

    Called without `argv` (the console script, `python -m yoyaku_client`), the process ends
    as soon as the command's output is written (`end_process`); with `argv` it raises
    `SystemExit` like any click program, for a caller that runs it in its own process."""
    try:
        _run(argv)
    except SystemExit as exc:
        if argv is not None:
            raise
        end_process(exc)


def end_process(exc: SystemExit) -> NoReturn:
    """Leave with `exc`'s exit code once stdout and stderr are flushed, without the
    interpreter's shutdown: a command has closed its files, joined its threads and written
    its state files (atomically) by the time it returns, and what the shutdown would still do
    (free every module, run the collector over the whole heap) cost 20-40 ms of a short
    command's wall time and 10-20 ms of its CPU. Should a flush fail (a closed pipe), the
    ordinary exit reports it as Python does."""
    code = exc.code
    if code is None:
        status = EXIT_OK
    elif isinstance(code, int):
        status = code
    else:  # `sys.exit("message")`: Python prints the message and exits 1
        raise exc
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        raise exc from None
    os._exit(status)


def _run(argv: Sequence[str] | None) -> None:
    State.json_mode = False
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
        output.json_mode = State.json_mode
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
        output.json_mode = State.json_mode
        _fail(output, EXIT_USAGE if exc.usage else EXIT_ERROR, str(exc), exc.to_dict())
    except ApiError as exc:
        output.json_mode = State.json_mode
        code = EXIT_QUOTA if exc.code in QUOTA_CODES else EXIT_ERROR
        details = "".join(f"\n  {name}: {'; '.join(msgs)}" for name, msgs in exc.fields.items())
        _fail(output, code, f"{exc.error} ({exc.code}, HTTP {exc.status}){details}", exc.to_dict())
    except TransportError as exc:
        output.json_mode = State.json_mode
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
        output.json_mode = State.json_mode
        _fail(output, EXIT_ERROR, str(exc), {"success": False, "code": "error", "error": str(exc)})
    except OSError as exc:  # a local file vanished or could not be read, the config folder...
        output.json_mode = State.json_mode
        _fail(
            output, EXIT_ERROR, str(exc), {"success": False, "code": "os_error", "error": str(exc)}
        )
    sys.exit(EXIT_OK)
