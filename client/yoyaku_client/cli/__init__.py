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
from typing import TYPE_CHECKING, Any, NoReturn

import click

from yoyaku_client import __version__
from yoyaku_client.cli.common import (
    EXIT_CODES_HELP,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_QUOTA,
    EXIT_USAGE,
    CliExit,
    State,
)
from yoyaku_client.cli.lazy import LazyCommand, LazyGroup
from yoyaku_client.errors import (
    QUOTA_CODES,
    AmbiguousRequestError,
    ApiError,
    TransportError,
    YoyakuError,
)

if TYPE_CHECKING:
    from yoyaku_client.output import Output

__all__ = ["COMMANDS", "cli", "main"]

#: Every command of `yoyaku`: its module, its name there, and its line in `yoyaku --help`
#: (`tests/client/test_start_up.py` holds each line to the command's own help).
COMMANDS: dict[str, LazyCommand] = {
    "cancel": LazyCommand("jobs", "JOB_COMMANDS", "Cancel a queued or running job (again: fine)."),
    "challenge": LazyCommand(
        "challenges",
        "challenge",
        "A challenge: its phases and your team's limits (show), a host's bundle (push).",
    ),
    "challenges": LazyCommand(
        "challenges",
        "challenges",
        "List the challenges you may see: public ones and those you host or take part in.",
    ),
    "download": LazyCommand(
        "files",
        "download",
        "Download a submission's files (yours, or one you review): FILE by name or id, or "
        "every file.",
    ),
    "final": LazyCommand(
        "teams", "final", "Choose the submissions a phase's hidden splits rank your team by."
    ),
    "job": LazyCommand("jobs", "job", "Show one job (and with --wait, follow it to its end)."),
    "jobs": LazyCommand("jobs", "jobs", "List your jobs, newest first, with their scores."),
    "leaderboard": LazyCommand(
        "leaderboard",
        "leaderboard",
        "Best completed score per user, ranked, for each question on its own (no login "
        "needed while it is public).",
    ),
    "login": LazyCommand(
        "account",
        "login",
        "Check a token against the server and save both (file mode 0600), or log in with a "
        "password to get a new scoped token.",
    ),
    "logs": LazyCommand("jobs", "logs", "Print a job's captured output."),
    "questions": LazyCommand(
        "leaderboard",
        "questions",
        "List the questions that have a leaderboard, with their skills, how many users are "
        "ranked and the best score (no login needed while the leaderboard is public).",
    ),
    "quota": LazyCommand(
        "quota", "quota", "Show your limits, what you use now, and your reservations."
    ),
    "release": LazyCommand("quota", "QUOTA_COMMANDS", "Release a reservation (again: fine)."),
    "rescore": LazyCommand(
        "rescore",
        "rescore",
        "Show the phase's rescore in its newest scoring version (hosts): done, failed, total.",
    ),
    "reserve": LazyCommand(
        "quota",
        "reserve",
        "Hold a concurrent-job slot (e.g. before a long upload); `yoyaku release` frees it.",
    ),
    "review": LazyCommand(
        "review",
        "review",
        "Human review (reviewers): queue, claim, extend, release, complete; regrade (staff).",
    ),
    "schedule": LazyCommand(
        "schedule",
        "schedule",
        "Webhook reservations at an absolute time: book, list, show, cancel.",
    ),
    "submissions": LazyCommand(
        "submissions",
        "submissions",
        "List your submissions, newest first: status, question, skill, score and files.",
    ),
    "submit": LazyCommand(
        "submit", "submit", "Upload files (one per request) and enqueue one job."
    ),
    "team": LazyCommand(
        "teams",
        "team",
        "Your team in a challenge: create one, join one with its invite code, show it.",
    ),
    "token": LazyCommand(
        "tokens",
        "token",
        "Your API tokens: list, create (scoped, optional expiry), revoke.",
    ),
    "whoami": LazyCommand(
        "account",
        "whoami",
        "Show who the token belongs to, and where the settings came from.",
    ),
}


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
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
        _output(json_mode=False).error("interrupted; run the same command again to continue")
        sys.exit(130)
    except YoyakuError as exc:
        _fail_on(exc)
    except OSError as exc:  # a local file vanished or could not be read, the config folder...
        _fail(
            _output(),
            EXIT_ERROR,
            str(exc),
            {"success": False, "code": "os_error", "error": str(exc)},
        )
    sys.exit(EXIT_OK)


def _output(*, json_mode: bool | None = None) -> Output:
    """Where an error is written (imported here: a command that ends well never needs it)."""
    from yoyaku_client.output import Output

    return Output(json_mode=State.json_mode if json_mode is None else json_mode)


def _fail_on(exc: YoyakuError) -> NoReturn:
    """The message, `--json` document and exit code of an error of the client's."""
    from yoyaku_client.ids import IdError
    from yoyaku_client.submit.packing import LocalRefusal

    output = _output()
    if isinstance(exc, LocalRefusal):
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
    if isinstance(exc, IdError):
        _fail(output, EXIT_USAGE if exc.usage else EXIT_ERROR, str(exc), exc.to_dict())
    if isinstance(exc, ApiError):
        code = EXIT_QUOTA if exc.code in QUOTA_CODES else EXIT_ERROR
        details = "".join(f"\n  {name}: {'; '.join(msgs)}" for name, msgs in exc.fields.items())
        _fail(output, code, f"{exc.error} ({exc.code}, HTTP {exc.status}){details}", exc.to_dict())
    if isinstance(exc, TransportError):
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
    _fail(output, EXIT_ERROR, str(exc), {"success": False, "code": "error", "error": str(exc)})
