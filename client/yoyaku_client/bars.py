"""Progress bars drawn as plain lines: what `yoyaku submit` shows on a terminal.

A redraw is a few formatted strings and one write: the cursor goes back up over the bars
drawn last (`ESC [ n A`), clears to the end of the screen (`ESC [ J`) and writes them again.
A line printed while bars are shown goes above them. rich's `Progress` renders a table for
each redraw and each new bar (measuring every column of every row), which cost a
`yoyaku submit` several milliseconds of CPU per redraw in the thread that sends the files.

Every method may be called from any thread (the files are hashed on one thread while
another sends them); text from elsewhere (file names) is passed in already made safe.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import IO

__all__ = ["Bars", "binary_size"]

_UP = "\x1b[{}A"
_CLEAR_DOWN = "\x1b[J"
_RESET = "\x1b[0m"
_COLOURS = {"done": "\x1b[38;5;197m", "finished": "\x1b[32m", "rest": "\x1b[38;5;237m"}
_STYLES = {"yellow": "\x1b[33m", "bold red": "\x1b[1;31m", "dim": "\x1b[2m"}


def binary_size(count: float, bytes_unit: str = "bytes") -> str:
    """1536 → "1.5 KiB"; what a bar shows beside itself (tables name bytes "B")."""
    value = float(count)
    for unit in (bytes_unit, "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == bytes_unit else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} {bytes_unit}"  # pragma: no cover


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}"


@dataclass
class _Bar:
    """One bar: its text, its size and how much of it is done."""

    description: str
    total: int
    completed: int = 0
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None


def _width(stream: IO[str]) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        raw = os.environ.get("COLUMNS", "")
        return int(raw) if raw.isdigit() and int(raw) > 0 else 80


class Bars:
    """Bars by id: `add`, `update`, `remove`, `draw`; `print` writes a line above them;
    `stop` leaves the last drawing on the screen."""

    def __init__(self, stream: IO[str], *, width: int | None = None) -> None:
        self.stream = stream
        self.width = max(40, width or _width(stream))
        self._bars: dict[int, _Bar] = {}
        self._next = 0
        self._shown = 0  # bar lines on the screen, under the cursor's line
        self._lock = threading.RLock()
        self._stopped = False

    def add(self, description: str, total: int) -> int:
        with self._lock:
            self._next += 1
            self._bars[self._next] = _Bar(description, max(1, total))
            return self._next

    def update(
        self, bar: int, *, completed: int | None = None, advance: int = 0, description: str = ""
    ) -> None:
        with self._lock:
            item = self._bars.get(bar)
            if item is None:
                return
            if completed is not None:
                item.completed = completed
            item.completed = min(item.total, item.completed + advance)
            if description:
                item.description = description
            if item.completed >= item.total and item.finished is None:
                item.finished = time.monotonic()

    def remove(self, bar: int) -> None:
        with self._lock:
            self._bars.pop(bar, None)

    def print(self, text: str, style: str | None = None) -> None:
        """`text` on a line of its own above the bars (`style`: "yellow", "bold red", "dim")."""
        with self._lock:
            line = f"{_STYLES[style]}{text}{_RESET}" if style in _STYLES else text
            self._write(line + "\n", redraw=not self._stopped)

    def draw(self) -> None:
        with self._lock:
            if not self._stopped:
                self._write("", redraw=True)

    def stop(self) -> None:
        """Draw the bars one last time and leave them (idempotent)."""
        with self._lock:
            if not self._stopped:
                self._write("", redraw=True)
                self._stopped = True
                self._shown = 0

    def _write(self, text: str, *, redraw: bool) -> None:
        out = (_UP.format(self._shown) + _CLEAR_DOWN) if self._shown else ""
        out += text
        self._shown = 0
        if redraw:
            lines = self._lines(time.monotonic())
            out += "".join(f"{line}\n" for line in lines)
            self._shown = len(lines)
        if out:
            self.stream.write(out)
            self.stream.flush()

    def _lines(self, now: float) -> list[str]:
        bars = list(self._bars.values())
        if not bars:
            return []
        label = min(max(len(b.description) for b in bars), self.width // 3)
        rows = []
        for item in bars:
            end = item.finished or now
            elapsed = max(1e-6, end - item.started)
            speed = item.completed / elapsed if item.completed else None
            remaining = (
                0.0 if item.finished else (item.total - item.completed) / speed if speed else None
            )
            right = (
                f" {binary_size(item.completed)}/{binary_size(item.total)}"
                f" {binary_size(speed) + '/s' if speed else '?':>12} {_clock(remaining)}"
            )
            text = item.description[:label].ljust(label)
            room = max(10, self.width - 1 - label - 1 - len(right))
            filled = room * item.completed // item.total
            colour = _COLOURS["finished" if item.finished else "done"]
            bar = f"{colour}{'━' * filled}{_RESET}{_COLOURS['rest']}{'━' * (room - filled)}{_RESET}"
            rows.append(f"{text} {bar}{right}")
        return rows
