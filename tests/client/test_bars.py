"""The progress bars of `yoyaku submit`: plain lines, redrawn in place, messages above them."""

from __future__ import annotations

import io
import threading

from yoyaku_client.bars import Bars, binary_size


def test_bars_redraw_in_place_and_lines_go_above_them() -> None:
    stream = io.StringIO()
    bars = Bars(stream, width=80)
    overall = bars.add("0/2 files", 300)
    item = bars.add("  a.py", 100)
    bars.update(item, completed=50)
    bars.update(overall, completed=50)
    bars.draw()
    first = stream.getvalue()
    assert first.count("\n") == 2
    assert "50.0 bytes" not in first
    assert "50 bytes/100 bytes" in first
    assert all(len(_visible(line)) < 80 for line in first.splitlines())

    bars.print("[1/2 files] a.py uploaded", style="yellow")
    after = stream.getvalue()[len(first) :]
    # Back up over the two bars, clear, the line, then the bars again.
    assert after.startswith("\x1b[2A\x1b[J\x1b[33m[1/2 files] a.py uploaded\x1b[0m\n")
    assert after.count("\n") == 3

    bars.remove(item)
    bars.update(overall, completed=300, description="2/2 files")
    bars.stop()
    bars.stop()  # idempotent: drawn once
    last = stream.getvalue()[len(first) + len(after) :]
    assert last.startswith("\x1b[2A\x1b[J")
    assert last.count("\n") == 1
    assert "2/2 files" in last
    assert "300 bytes/300 bytes" in last
    bars.print("after")  # once stopped, lines go below the bars left on the screen
    assert stream.getvalue().endswith("after\n")


def test_bars_take_updates_from_several_threads() -> None:
    stream = io.StringIO()
    bars = Bars(stream, width=60)
    bar = bars.add("hashing", 4000)

    def work() -> None:
        for _ in range(100):
            bars.update(bar, advance=10)
            bars.draw()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    bars.stop()
    assert "3.9 KiB/3.9 KiB" in stream.getvalue().splitlines()[-1]


def test_binary_sizes() -> None:
    assert [binary_size(n) for n in (0, 1023, 1536, 5 * 1024**2)] == [
        "0 bytes",
        "1023 bytes",
        "1.5 KiB",
        "5.0 MiB",
    ]


def _visible(line: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", line)
