"""`LazyGroup`: a click group whose commands are imported when one is used.

`yoyaku submit` imports the modules `submit` needs and no other command's; `yoyaku --help`
imports none, and lists each command by the one-line help the group keeps for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from gettext import gettext as _
from importlib import import_module
from typing import Any, NamedTuple

import click


class LazyCommand(NamedTuple):
    """Where a command is and what `yoyaku --help` says of it: `attribute` of
    `yoyaku_client.cli.<module>`, a command or a table of `IdCommand` lines (the line of the
    command's name), and `summary`, the first sentence of its help."""

    module: str
    attribute: str
    summary: str


class LazyGroup(click.Group):
    """A group of commands named in `lazy`, each imported on its first use (`get_command`)."""

    def __init__(self, *args: Any, lazy: Mapping[str, LazyCommand], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(self.load(cmd_name), cmd_name)
        return self.commands.get(cmd_name)

    def load(self, name: str) -> click.Command:
        """The command `name` (imported now)."""
        where = self.lazy[name]
        found = getattr(import_module(f"yoyaku_client.cli.{where.module}"), where.attribute)
        if isinstance(found, click.Command):
            return found
        from yoyaku_client.cli.common import id_command

        return id_command(next(line for line in found if line.name == name))

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:
            # click suggests close names from the commands loaded: these are all of them.
            raise click.exceptions.NoSuchCommand(
                exc.command_name, possibilities=self.list_commands(ctx), ctx=ctx
            ) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands' section of the help, as click writes it, from the summaries of the
        commands not loaded (the text click shortens is the same: the first sentence)."""
        rows: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name) or click.Command(name, help=self.lazy[name].summary)
            if not command.hidden:
                rows.append((name, command))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section(_("Commands")):
                formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in rows])
