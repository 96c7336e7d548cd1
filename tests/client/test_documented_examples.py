"""The documentation cannot rot: every `sh` block of docs/client.md and of the README's quick
start, and the examples of `yoyaku schedule --help` and `yoyaku schedule book --help`, run
against a live server through bash and the installed `yoyaku`, as the role the comment above
each command names (staff where it says so, else a plain user); each must exit 0."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from apps.core.models import ApiToken
from apps.jobs.models import Job
from apps.schedule.models import Life
from tests.client.conftest import EXAMPLES, ROOT, Cli, token_for, yoyaku_command
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db(transaction=True)

DOCUMENTED_URL = "http://127.0.0.1:8000"
PASSWORD = "a-documented-password-1"


@dataclass(frozen=True)
class Command:
    source: str
    text: str
    staff: bool


def sh_blocks(markdown: str) -> Iterator[str]:
    yield from re.findall(r"^```sh\n(.*?)^```", markdown, flags=re.DOTALL | re.MULTILINE)


def commands_of(text: str, source: str) -> list[Command]:
    """The `yoyaku` commands of a block of shell lines (`make run` is the live server the
    tests start): continuation lines joined; a comment above a command that mentions staff
    makes it a staff command."""
    found: list[Command] = []
    comment = ""
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            comment = (comment + " " + line) if line.startswith("#") else ""
            continue
        pending += line[:-1] + " " if line.endswith("\\") else line
        if line.endswith("\\"):
            continue
        first = pending.split()[0]
        if first in ("yoyaku", ".venv/bin/yoyaku") or "_YOYAKU_COMPLETE" in pending:
            found.append(Command(source, pending, "staff" in comment.lower()))
        pending, comment = "", ""
    return found


def help_commands(cli: Cli, *args: str) -> list[Command]:
    """The examples of a command's --help: the lines after "Examples", with their
    continuations; a heading line naming staff makes the commands after it staff ones."""
    text = cli.run(*args, "--help").stdout
    lines: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("yoyaku ") or (lines and lines[-1].endswith("\\")):
            lines.append(stripped)
        elif "staff" in stripped.lower() and stripped.endswith(":"):
            lines.append("# staff")
        elif stripped.startswith(("Examples", "Example")):
            lines.append("# anyone")
    return commands_of("\n".join(lines), " ".join(args) + " --help")


def documented_commands() -> list[Command]:
    client_md = (ROOT / "docs" / "client.md").read_text()
    readme = (ROOT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    found: list[Command] = []
    for block in sh_blocks(client_md):
        found += commands_of(block, "docs/client.md")
    for block in sh_blocks(quick_start):
        found += commands_of(block, "README.md")
    return found


class Runner:
    def __init__(self, cli: Cli, user: User, staff: User, workdir: Path) -> None:
        self.cli = cli
        self.user = user
        self.staff_cli = cli.as_user(token_for(staff))
        self.workdir = workdir
        script = Path(yoyaku_command()[0])
        self.script = str(script)

    def substitute(self, text: str, *, staff: bool) -> str:
        owner = self.user
        replacements = {
            DOCUMENTED_URL: self.cli.url,
            ".venv/bin/yoyaku": self.script,
            "examples/": f"{EXAMPLES}/",
            "<token>": self.cli.token or "",
            "<demo token>": self.cli.token or "",
        }
        for old, new in replacements.items():
            text = text.replace(old, new)
        if "<job>" in text:
            text = text.replace("<job>", Job.objects.filter(owner=owner).latest("created_at").pk)
        if "<life_uuid>" in text:
            life = Life.objects.filter(owner=owner).latest("created_at")
            text = text.replace("<life_uuid>", life.life_uuid)
        if "<id>" in text:
            token = ApiToken.objects.filter(user=owner).latest("created_at")
            text = text.replace("<id>", token.pk)
        assert not re.search(r"<[a-z_ ]+>", text), f"a placeholder is left in {text}"
        return text

    def run(
        self, command: Command, *, as_staff: bool | None = None
    ) -> subprocess.CompletedProcess[str]:
        staff = command.staff if as_staff is None else as_staff
        cli = self.staff_cli if staff else self.cli
        shell = "bash"
        for name in ("zsh", "fish"):
            if f"{name}_source" in command.text:
                shell = name
        text = self.substitute(command.text, staff=staff)
        if shutil.which(shell) is None:
            # No such shell here: bash runs the part that prints the completion script.
            text = re.sub(r'^eval "\$\((.*?)\)"', r"\1", text).replace(" | source", "")
            shell = "bash"
        env = cli.env(
            YOYAKU_PASSWORD=PASSWORD,
            GITHUB_SHA="0123abcd",
            GITHUB_REPOSITORY="lab/model",
            COLUMNS="80",
        )
        if shell == "zsh":
            # What a ~/.zshrc has before any completion line: the completion system loaded
            # (its `compdef`), without writing a dump file.
            text = f"autoload -Uz compinit && compinit -D -u\n{text}"
        argv = (
            ["bash", "-e", "-o", "pipefail", "-c", text] if shell == "bash" else [shell, "-c", text]
        )
        return subprocess.run(
            argv,
            cwd=self.workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )


@pytest.fixture
def runner(cli: Cli, researcher: User, tmp_path: Path, settings: Any) -> Runner:
    settings.SCHEDULE_WEBHOOK_ALLOWED_HOSTS = ["hooks.example.org"]
    alice = make_user(username="alice")
    alice.set_password(PASSWORD)
    alice.save()
    staff = make_user(username="operator", is_staff=True, is_superuser=True)
    workdir = tmp_path / "work"
    workdir.mkdir()
    for name in ("main.py", "config.yaml"):
        shutil.copy(EXAMPLES / "hello" / name, workdir / name)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = b"weights\n"
        info = tarfile.TarInfo("weights.bin")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    (workdir / "weights.tar.gz").write_bytes(buffer.getvalue())
    (workdir / "booking.json").write_text(
        '{"schedule_type": "point", "term": {"birth_time": "2030-01-15 09:00:00"}, '
        '"birth": {"path": "/api/quotas/reservations/", "method": "POST", '
        '"body": {"ttl_seconds": 600}}}'
    )
    return Runner(cli, researcher, staff, workdir)


def test_the_docs_hold_commands_for_both_roles() -> None:
    commands = documented_commands()
    assert len(commands) >= 25
    assert any(c.staff and "quota.boost" in c.text for c in commands)
    assert not any("quota.boost" in c.text and not c.staff for c in commands)
    assert any(c.source == "README.md" for c in commands)


def test_every_documented_command_runs(runner: Runner, grading: Any) -> None:
    outputs: list[str] = []
    for command in documented_commands():
        done = runner.run(command)
        where = f"{command.source}: {command.text}\nexit {done.returncode}"
        assert done.returncode == 0, f"{where}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr
        outputs.append(done.stdout)
        if command.source == "README.md" and "submit" in command.text:
            assert done.stdout.strip().splitlines()[-1] == "completed 1"
    assert Job.objects.filter(status="completed").exists()


def test_the_staff_examples_are_refused_for_a_user(runner: Runner) -> None:
    """The role beside an example matters: a user running the staff booking gets 403."""
    staff_only = [c for c in documented_commands() if c.staff]
    assert staff_only
    for command in staff_only:
        done = runner.run(command, as_staff=False)
        assert done.returncode == 1, done.stderr
        assert "permission_denied" in done.stderr


def test_the_schedule_help_examples_run(runner: Runner) -> None:
    commands = help_commands(runner.cli, "schedule") + help_commands(runner.cli, "schedule", "book")
    assert any(c.staff for c in commands)
    assert len([c for c in commands if "schedule book" in c.text]) >= 4
    for command in commands:
        done = runner.run(command)
        assert done.returncode == 0, (
            f"{command.source}: {command.text}\nexit {done.returncode}\n{done.stderr}"
        )
    assert Life.objects.count() >= 4
