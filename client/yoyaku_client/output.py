"""How the CLI shows things: JSON on stdout with `--json`, rich tables otherwise; messages,
warnings and progress on stderr (so stdout stays parseable).

Text that came from elsewhere (a program's output, job reasons, file and user names, error
messages) never reaches the terminal as control sequences: every writer here passes it through
`terminal_safe`, which writes C0 and C1 controls, DEL and bidirectional controls as visible
escapes (`\\x1b`, `\\u202e`), and rich is told to read no markup and no emoji codes in it.
JSON output is safe by JSON's own escaping (ASCII only).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

from yoyaku_client.bars import Bars, binary_size
from yoyaku_client.decode import to_jsonable
from yoyaku_client.submit.reporting import Reporter

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from yoyaku_client.submit.packing import LocalFile

# C0 controls but LF and TAB, DEL, C1 controls (CSI U+009B, OSC U+009D, ...), and the
# bidirectional controls that make a terminal with bidi support reorder a line.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_LINE_BREAKS = re.compile("\r\n|\r")
_ID_CELL = re.compile(r"^[0-9a-f]{4,32}$")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """`text` without a terminal control sequence: CR LF and a lone CR become a line break (a
    program's progress frames show one per line, none overwrites another), every other control
    character but LF and TAB is written as a visible escape (ESC as `\\x1b`, U+202E as
    `\\u202e`). Nothing else changes."""
    if "\r" in text:
        text = _LINE_BREAKS.sub("\n", text)
    return _UNSAFE.sub(_visible, text)


class TerminalStream:
    """`terminal_safe` over text that arrives in pieces (`logs --follow`): a CR at the end of
    a piece waits for the next one, so a CR LF split between two pieces is one line break."""

    def __init__(self) -> None:
        self._pending_cr = False

    def feed(self, text: str) -> str:
        if self._pending_cr:
            text = "\r" + text
        self._pending_cr = text.endswith("\r")
        if self._pending_cr:
            text = text[:-1]
        return terminal_safe(text)

    def close(self) -> str:
        pending, self._pending_cr = self._pending_cr, False
        return "\n" if pending else ""


def plain(text: str) -> Text:
    """Text from elsewhere as a rich renderable: escaped, never read as markup or emoji codes."""
    from rich.text import Text

    return Text(terminal_safe(text))


def _columns() -> int | None:
    """`COLUMNS` when it is set to a width (a pipe has no width of its own)."""
    raw = os.environ.get("COLUMNS", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def _console(stream: Any, *, force_terminal: bool | None = None) -> Console:
    from rich.console import Console

    terminal = stream.isatty() if force_terminal is None else force_terminal
    return Console(
        file=stream,
        force_terminal=force_terminal,
        width=None if terminal else (_columns() or 160),
        soft_wrap=not terminal,
        highlight=False,
        emoji=False,
    )


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Output:
    """Where the command writes. rich is imported only for what needs it: a table, or a line
    for a terminal (wrapped and coloured); a line for a pipe or a file is the same text as rich
    would write there (escaped, tabs expanded, no colour), written directly, so a command that
    prints only lines (`yoyaku submit` in CI) never loads rich."""

    def __init__(self, *, json_mode: bool = False) -> None:
        self.json_mode = json_mode
        self._stdout = sys.stdout
        self._stderr = sys.stderr
        self._out: Console | None = None
        self._err: Console | None = None

    @property
    def out(self) -> Console:
        if self._out is None:
            self._out = _console(self._stdout)
        return self._out

    @property
    def err(self) -> Console:
        if self._err is None:
            self._err = _console(self._stderr)
        return self._err

    def _line(self, to_err: bool, text: str, style: str | None = None) -> None:
        stream = self._stderr if to_err else self._stdout
        if _isatty(stream):
            (self.err if to_err else self.out).print(plain(text), style=style)
            return
        stream.write(terminal_safe(text).expandtabs(8) + "\n")
        stream.flush()

    def json(self, value: Any) -> None:
        sys.stdout.write(json.dumps(to_jsonable(value), indent=2, sort_keys=False) + "\n")
        sys.stdout.flush()

    def json_line(self, value: Any) -> None:
        sys.stdout.write(json.dumps(to_jsonable(value), separators=(",", ":")) + "\n")
        sys.stdout.flush()

    def message(self, text: str) -> None:
        """A human message on stderr (so with `--json` too: stdout stays one document)."""
        self._line(True, text)

    def warning(self, text: str) -> None:
        self._line(True, f"Warning: {text}", "yellow")

    def error(self, text: str) -> None:
        self._line(True, f"Error: {text}", "bold red")

    def note(self, text: str, *, style: str) -> None:
        """A styled side note on stderr (retries)."""
        self._line(True, text, style)

    def print(self, text: str, *, style: str | None = None) -> None:
        """A line on stdout; `style` colours it on a terminal only (a pipe gets plain text)."""
        self._line(False, text, style)

    def write(self, text: str) -> None:
        """Text as it is to stdout, without rich (a program's output: `terminal_safe` first,
        unless the user asked for the raw bytes)."""
        sys.stdout.write(text)
        sys.stdout.flush()

    def table(
        self, title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> None:
        from rich.table import Table

        table = Table(
            title=None if title is None else plain(title), show_lines=False, title_justify="left"
        )
        cells = [[fmt(v) for v in row] for row in rows]
        for index, column in enumerate(columns):
            # A column of ids is never folded: a shortened id must stay copyable in one piece.
            ids = [row[index] for row in cells if index < len(row) and row[index] != "-"]
            whole = bool(ids) and all(_ID_CELL.match(v) for v in ids)
            table.add_column(plain(column), overflow="fold", no_wrap=whole)
        for row in cells:
            table.add_row(*[plain(v) for v in row])
        self.out.print(table)

    def fields(self, title: str | None, pairs: Sequence[tuple[str, Any]]) -> None:
        from rich.table import Table

        table = Table(
            title=None if title is None else plain(title), show_header=False, title_justify="left"
        )
        table.add_column("field", style="bold")
        table.add_column("value", overflow="fold")
        for name, value in pairs:
            table.add_row(plain(name), plain(fmt(value)))
        self.out.print(table)


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dt.datetime):
        return value.isoformat(timespec="seconds")
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def table_time(value: dt.datetime | None) -> str:
    """A time in a table: local, to the minute (`job ID` and --json give it whole)."""
    if value is None:
        return "-"
    return value.astimezone().strftime("%Y-%m-%d %H:%M")


def size(count: int) -> str:
    """1536 → "1.5 KiB", as a table shows a file's size."""
    return binary_size(count, "B")


class QuietReporter(Reporter):
    """`--json`: only warnings (on stderr)."""

    def __init__(self, output: Output) -> None:
        self.output = output

    def warning(self, text: str) -> None:
        self.output.warning(text)


class LineReporter(QuietReporter):
    """Not a terminal: one line per step, no bars."""

    def message(self, text: str) -> None:
        self.output.message(text)

    def hashing_started(self, total_bytes: int) -> None:
        self.output.message(f"hashing {size(total_bytes)}")

    def file_finished(self, item: LocalFile, index: int, count: int, *, created: bool) -> None:
        note = "" if created else " (already there: same content)"
        self.output.message(f"[{index}/{count} files] {item.name} {size(item.size)} uploaded{note}")


class ProgressReporter(QuietReporter):
    """A terminal: a bar per file under way and one for the whole upload ("k/N files"), drawn
    as plain lines (`yoyaku_client.bars`); `stream` is drawn for a terminal whatever it is
    (`--progress` into a file or a pipe). The upload's calls come from its senders' threads
    one at a time (under the upload's lock); the hashing thread touches only its own bar."""

    def __init__(self, output: Output, stream: IO[str] | None = None) -> None:
        super().__init__(output)
        self.bars = Bars(stream or sys.stderr, width=_columns())
        self._last_update = 0.0
        self._last_draw = 0.0
        self._hash: int | None = None
        self._overall: int | None = None
        # The files under way (several at once): their bars and bytes sent, by `id(item)`.
        self._files: dict[int, int] = {}
        self._sent: dict[int, int] = {}
        self._base = 0
        self._count = 0
        self._done = 0

    def message(self, text: str) -> None:
        self.bars.print(terminal_safe(text))

    def warning(self, text: str) -> None:
        self.bars.print(terminal_safe(f"Warning: {text}"), style="yellow")

    def hashing_started(self, total_bytes: int) -> None:
        self._hash = self.bars.add("hashing", total_bytes)

    def _draw(self, now: float) -> None:
        # Redrawn when something moved, at most 5 times a second, never on a clock: a round
        # stretched by a busy machine or a slow answer costs no redraws of still bars.
        if now - self._last_draw >= 0.2:
            self._last_draw = now
            self.bars.draw()

    def hashing_advanced(self, count: int) -> None:
        if self._hash is not None:
            self.bars.update(self._hash, advance=count)
            self._draw(time.monotonic())

    def hashing_finished(self) -> None:
        if self._hash is not None:
            self.bars.remove(self._hash)
            self._hash = None

    def upload_started(self, files: Sequence[LocalFile], already: int) -> None:
        self._count = len(files) + already
        self._done = already
        total = sum(f.size for f in files)
        self._overall = self.bars.add(self._overall_text(), total)

    def _overall_text(self) -> str:
        return f"{self._done}/{self._count} files"

    def file_started(self, item: LocalFile, index: int, count: int) -> None:
        self._files[id(item)] = self.bars.add(f"  {terminal_safe(item.name)}", item.size)
        self._sent[id(item)] = 0

    def file_progress(self, item: LocalFile, sent: int, total: int) -> None:
        now = time.monotonic()
        if sent < total and now - self._last_update < 0.05:
            return  # the bars redraw at most 5 times a second: more would only cost CPU
        self._last_update = now
        # `sent` counts the whole multipart body; scale it to the file's own bytes.
        done = item.size if total <= 0 else min(item.size, sent * item.size // total)
        self._sent[id(item)] = done
        bar = self._files.get(id(item))
        if bar is not None:
            self.bars.update(bar, completed=done)
        if self._overall is not None:
            self.bars.update(self._overall, completed=self._base + sum(self._sent.values()))
        self._draw(now)

    def file_finished(self, item: LocalFile, index: int, count: int, *, created: bool) -> None:
        self._base += item.size
        self._done = index
        self._sent.pop(id(item), None)
        bar = self._files.pop(id(item), None)
        if bar is not None:
            self.bars.remove(bar)
        if self._overall is not None:
            self.bars.update(
                self._overall,
                completed=self._base + sum(self._sent.values()),
                description=self._overall_text(),
            )
        note = "" if created else " (already there: same content)"
        self.message(f"[{index}/{count} files] {item.name} {size(item.size)} uploaded{note}")

    def upload_finished(self) -> None:
        self.bars.stop()

    def close(self) -> None:
        self.bars.stop()
