"""What the benchmark commands do for a terminal: a dry run's diff is coloured on a terminal
(a real pseudo-terminal) and plain in a pipe, and the shell completion that click generates
completes the benchmark commands in a real bash, and through the zsh and fish protocols."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
from pathlib import Path

from tests.client.conftest import ROOT, Cli, yoyaku_command
from tests.client.test_benchmarks_cli import _bundle_folder, _host

ESC = "\x1b"


def _on_a_terminal(cli: Cli, *args: str) -> tuple[int, str]:
    """`yoyaku ARGS` with stdout on a pseudo-terminal of 200 columns: exit code and output."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    env = cli.env()
    env.pop("NO_COLOR", None)
    env["TERM"] = "xterm-256color"
    process = subprocess.Popen(
        [*yoyaku_command(), *args],
        env=env,
        stdout=follower,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    os.close(follower)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other side closed (the process ended)
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    process.communicate(timeout=120)
    return process.returncode, b"".join(chunks).decode()


def test_dry_run_diff_is_coloured_on_a_terminal_and_plain_in_a_pipe(
    cli: Cli, tmp_path: Path
) -> None:
    host = _host(cli)
    host.json("challenge", "push", str(_bundle_folder(tmp_path, per_day=5)))
    changed = str(_bundle_folder(tmp_path, per_day=7))

    code, shown = _on_a_terminal(host, "challenge", "push", changed, "--dry-run")

    assert code == 0, shown
    line = next(x for x in shown.splitlines() if "phases.dev.limits.per_day" in x)
    assert f"{ESC}[33m~ phases.dev.limits.per_day: 5 → 7" in line  # yellow: an update
    piped = host.run("challenge", "push", changed, "--dry-run")
    assert piped.code == 0, piped.stderr
    assert "~ phases.dev.limits.per_day: 5 → 7" in piped.stdout.splitlines()
    assert ESC not in piped.stdout


def _completion_env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("YOYAKU_", "COMP_"))}
    env.update(values)
    env["PATH"] = f"{Path(yoyaku_command()[0]).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _bash_completes(words: str, current: int) -> list[str]:
    """What a real bash offers after sourcing the script `yoyaku` generates."""
    script = (
        'eval "$(_YOYAKU_COMPLETE=bash_source yoyaku)"\n'
        f"COMP_WORDS=({words})\nCOMP_CWORD={current}\n"
        "_yoyaku_completion yoyaku\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        env=_completion_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_bash_completion_offers_the_benchmark_commands() -> None:
    commands = _bash_completes("yoyaku ''", 1)
    for name in ("challenges", "challenge", "team", "final", "submit", "leaderboard"):
        assert name in commands
    assert _bash_completes("yoyaku te", 1) == ["team"]
    assert sorted(_bash_completes("yoyaku team ''", 2)) == ["create", "join", "show"]
    assert sorted(_bash_completes("yoyaku final ''", 2)) == ["select", "unselect"]
    assert "--dry-run" in _bash_completes("yoyaku challenge push --d", 3)
    assert "--challenge" in _bash_completes("yoyaku submit --ch", 2)


def test_zsh_and_fish_scripts_call_back_and_complete_the_benchmark_commands() -> None:
    for shell, marker in (("zsh", "compdef _yoyaku_completion yoyaku"), ("fish", "complete ")):
        source = subprocess.run(
            yoyaku_command(),
            env=_completion_env(_YOYAKU_COMPLETE=f"{shell}_source"),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert source.returncode == 0, source.stderr
        assert marker in source.stdout
        assert f"_YOYAKU_COMPLETE={shell}_complete" in source.stdout
    zsh = subprocess.run(
        yoyaku_command(),
        env=_completion_env(
            _YOYAKU_COMPLETE="zsh_complete", COMP_WORDS="yoyaku challenge ", COMP_CWORD="2"
        ),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert zsh.returncode == 0, zsh.stderr
    assert {"push", "show"} <= set(zsh.stdout.split("\n"))
    fish = subprocess.run(
        yoyaku_command(),
        env=_completion_env(
            _YOYAKU_COMPLETE="fish_complete", COMP_WORDS="yoyaku fi", COMP_CWORD="fi"
        ),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert fish.returncode == 0, fish.stderr
    assert fish.stdout.split("\n")[0].startswith("plain,final")
