"""What every `yoyaku` command shares: exit codes, `--json`, the client built from the
settings, and `id_command`, which makes the commands that take one id, make one call and
print its answer from one line of a table."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import click

from yoyaku_client.record import Record

if TYPE_CHECKING:
    from yoyaku_client.client import Client
    from yoyaku_client.output import Output
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


class State:
    """Whether this run was given `--json`, for `main`'s error output (set while parsing)."""

    json_mode = False


def _set_json(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        State.json_mode = True
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


def output_for(as_json: bool) -> Output:
    from yoyaku_client.output import Output

    return Output(json_mode=as_json)


def retry_policy() -> RetryPolicy:
    from yoyaku_client.transport import RetryPolicy

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


def open_client(output: Output, *, need_token: bool = True) -> Client:
    from yoyaku_client.client import Client
    from yoyaku_client.config import load_settings

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
        retry=retry_policy(),
        on_retry=on_retry,
        timeout=float(timeout) if timeout else None,
    )


def json_arg(value: str | None, name: str) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        data = json.loads(value)
    except ValueError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint=name) from exc
    if not isinstance(data, dict):
        raise click.BadParameter("must be a JSON object", param_hint=name)
    return data


R = TypeVar("R")


@dataclass(frozen=True, eq=False, repr=False)
class IdCommand(Record, Generic[R]):
    """`yoyaku [GROUP] NAME ID`: resolve ID (a unique prefix gives the whole id), make one
    call, and print its answer: `--json` the answer itself, otherwise `show(output, answer)`.
    `help` is the command's help text, as a docstring would give it."""

    name: str
    argument: str
    resolve: Callable[[Client, str], str]
    call: Callable[[Client, str], R]
    show: Callable[[Output, R], None]
    help: str


def id_command(entry: IdCommand[Any]) -> click.Command:
    """The click command of one `IdCommand` line."""

    @click.argument(entry.argument)
    @json_option
    def command(as_json: bool, **given: str) -> None:
        output = output_for(as_json)
        with open_client(output) as client:
            answer = entry.call(client, entry.resolve(client, given[entry.argument]))
        if as_json:
            output.json(answer)
        else:
            entry.show(output, answer)

    return click.command(entry.name, help=entry.help)(command)
