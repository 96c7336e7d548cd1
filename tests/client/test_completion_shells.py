"""Tab completion in the real zsh and fish, with the scripts `yoyaku` prints for them loaded
the way docs/client.md says: fish sources its script and answers `complete -C`; an interactive
zsh runs `compinit`, evals its script, and a tab typed on its line (in a pseudo-terminal)
completes the line, which a key bound to a widget of the test's own writes to a file.

Skipped where a shell is missing, unless YOYAKU_REQUIRE_SHELLS is set (CI installs both and
sets it: there, a skip would hide a broken completion)."""

from __future__ import annotations

import fcntl
import os
import select
import shutil
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.client.conftest import ROOT
from tests.client.test_benchmarks_terminal import _completion_env

#: Ctrl-T: bound in the test's zsh to a widget that writes the line to a file and clears it.
DUMP_KEY = b"\x14"


def _shell(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        if os.environ.get("YOYAKU_REQUIRE_SHELLS"):
            pytest.fail(f"{name} is required here (apt-get install {name})")
        pytest.skip(f"{name} is not installed")
    return found


def _home_env(tmp_path: Path) -> dict[str, str]:
    """The completion environment in a home of the test's own (no user start-up files)."""
    env = _completion_env()
    for name in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        folder = tmp_path / name.lower()
        folder.mkdir(exist_ok=True)
        env[name] = str(folder)
    env.pop("ZDOTDIR", None)
    return env


# --- fish ----------------------------------------------------------------------------------


def _fish_completes(fish: str, line: str, tmp_path: Path) -> list[str]:
    """What a real fish offers for `line` once the script `yoyaku` prints for fish is sourced
    (the candidates of `complete -C`, without their descriptions)."""
    script = f"_YOYAKU_COMPLETE=fish_source yoyaku | source\ncomplete -C {_fish_quote(line)}\n"
    done = subprocess.run(
        [fish, "--no-config", "-c", script],
        env=_home_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return [row.split("\t", 1)[0] for row in done.stdout.splitlines() if row]


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def test_fish_completes_commands_subcommands_and_options(tmp_path: Path) -> None:
    fish = _shell("fish")
    assert sorted(_fish_completes(fish, "yoyaku chal", tmp_path)) == ["challenge", "challenges"]
    assert _fish_completes(fish, "yoyaku te", tmp_path) == ["team"]
    assert sorted(_fish_completes(fish, "yoyaku team ", tmp_path)) == ["create", "join", "show"]
    assert "--dry-run" in _fish_completes(fish, "yoyaku challenge push --d", tmp_path)
    assert "--challenge" in _fish_completes(fish, "yoyaku submit --ch", tmp_path)


# --- zsh -----------------------------------------------------------------------------------


class Terminal:
    """An interactive program on a pseudo-terminal of 200 columns: keys in, output gathered."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.leader, follower = os.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        self.process = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=follower,
            stdout=follower,
            stderr=follower,
            start_new_session=True,  # the terminal becomes the shell's controlling terminal
        )
        os.close(follower)
        self.output = b""

    def read(self, first: float, quiet: float = 0.3) -> bytes:
        """What arrives: waits up to `first` seconds for a byte, then reads until `quiet`
        seconds pass without one."""
        got = b""
        wait = first
        while True:
            ready, _, _ = select.select([self.leader], [], [], wait)
            if not ready:
                return got
            try:
                chunk = os.read(self.leader, 65536)
            except OSError:  # EIO: the other side closed
                return got
            if not chunk:
                return got
            got += chunk
            self.output += chunk
            wait = quiet

    def wait_for(self, text: bytes, *, limit: float = 120.0) -> None:
        """Reads until `text` was shown (anywhere since the start)."""
        deadline = time.monotonic() + limit
        while text not in self.output:
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise AssertionError(f"{text!r} never came; the terminal showed {self.output!r}")
            self.read(0.2)

    def type(self, keys: bytes) -> None:
        os.write(self.leader, keys)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        os.close(self.leader)


ZSHRC = """\
bindkey -e
autoload -Uz compinit && compinit -u -D
eval "$(_YOYAKU_COMPLETE=zsh_source yoyaku)"
_test_dump_line() {{ print -r -- "$BUFFER" >> {lines}; BUFFER=''; zle accept-line; }}
zle -N _test_dump_line
bindkey '^T' _test_dump_line
PS1='ready%# '
print -r -- loaded-{token}
"""


@pytest.fixture
def zsh_line(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """`complete(typed)`: the line of an interactive zsh (compinit, the script `yoyaku` prints
    for zsh) after `typed` and a tab."""
    zsh = _shell("zsh")
    lines = tmp_path / "lines.txt"
    rc = tmp_path / "completion.zsh"
    token = os.urandom(4).hex()
    rc.write_text(ZSHRC.format(lines=lines, token=token))
    env = {**_home_env(tmp_path), "TERM": "xterm", "PS1": "> "}
    terminal = Terminal([zsh, "-f", "-i"], env, ROOT)
    terminal.type(f"source {rc}\n".encode())
    terminal.wait_for(f"loaded-{token}".encode())
    terminal.wait_for(b"ready")

    def complete(typed: str) -> str:
        done = len(lines.read_text().splitlines()) if lines.exists() else 0
        terminal.type(typed.encode())
        terminal.read(10.0)  # the typed keys echoed
        terminal.type(b"\t")
        # The tab runs `yoyaku` (a Python start-up), then redraws the line: nothing is shown
        # before the completion is done, so the first output after the tab is its result.
        terminal.read(120.0, quiet=0.5)
        terminal.type(DUMP_KEY)
        deadline = time.monotonic() + 60
        while True:
            now = lines.read_text().splitlines() if lines.exists() else []
            if len(now) > done:
                return now[done]
            if time.monotonic() > deadline:
                raise AssertionError(f"no line was written; the terminal: {terminal.output!r}")
            terminal.read(0.2)

    yield complete
    terminal.close()


def test_zsh_completes_commands_subcommands_and_options(
    zsh_line: Callable[[str], str],
) -> None:
    complete = zsh_line
    assert complete("yoyaku te") == "yoyaku team "
    assert complete("yoyaku fi") == "yoyaku final "
    # Two commands start with `chal`: their common part is completed, no space after it.
    assert complete("yoyaku chal") == "yoyaku challenge"
    assert complete("yoyaku challenge pu") == "yoyaku challenge push "
    assert complete("yoyaku challenge push --dr") == "yoyaku challenge push --dry-run "
    assert complete("yoyaku submit --chal") == "yoyaku submit --challenge "
