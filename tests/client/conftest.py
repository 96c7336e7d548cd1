"""Fixtures of the client tests: a live server on loopback, the real `yoyaku` console script
run as a subprocess, a fault-injecting proxy, and a grading thread that plays the worker."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from django.db import connection

from tests import faults
from tests.client.hostile import Handle, Hostile
from tests.client.proxy import FaultProxy
from tests.factories.tokens import make_token
from tests.factories.users import make_user

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def yoyaku_command() -> list[str]:
    """The installed console script (what `pip install ./client` puts on PATH)."""
    script = Path(sys.executable).parent / "yoyaku"
    if script.exists():
        return [str(script)]
    found = shutil.which("yoyaku")
    if found:
        return [found]
    pytest.fail("the `yoyaku` console script is not installed (make install)")


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        try:
            return json.loads(self.stdout)
        except ValueError as exc:
            raise AssertionError(
                f"stdout is not JSON ({exc}):\n{self.stdout}\nstderr:\n{self.stderr}"
            ) from exc


@dataclass
class Cli:
    """Runs `yoyaku` against a server with a token, in its own config directory."""

    url: str
    token: str | None
    config_dir: Path
    extra_env: dict[str, str]

    def env(self, **overrides: str) -> dict[str, str]:
        # Not the test process's COLUMNS/LINES: a pytest-xdist worker has them (80x24) though no
        # terminal, and the CLI would draw its tables for that width instead of a pipe's.
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("YOYAKU_", "DJANGO_")) and k not in ("COLUMNS", "LINES")
        }
        env.update(
            YOYAKU_URL=self.url,
            YOYAKU_CONFIG_DIR=str(self.config_dir),
            YOYAKU_RETRY_DELAY="0.05",
            YOYAKU_RETRY_MAX_DELAY="0.5",
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            **self.extra_env,
        )
        if self.token:
            env["YOYAKU_TOKEN"] = self.token
        env.update(overrides)
        return env

    def run(self, *args: str, timeout: float = 120, **env: str) -> CliResult:
        done = subprocess.run(
            [*yoyaku_command(), *args],
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            check=False,
        )
        return CliResult(done.returncode, done.stdout, done.stderr)

    def popen(self, *args: str, **env: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*yoyaku_command(), *args],
            env=self.env(**env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )

    def json(self, *args: str, expect: int = 0, **env: str) -> Any:
        result = self.run(*args, "--json", timeout=120, **env)
        assert result.code == expect, (
            f"exit {result.code} (expected {expect})\n{result.stdout}\n{result.stderr}"
        )
        return result.json()

    def as_user(self, token: str | None) -> Cli:
        return Cli(self.url, token, self.config_dir, dict(self.extra_env))

    def via(self, url: str) -> Cli:
        return Cli(url, self.token, self.config_dir, dict(self.extra_env))


def token_for(user: User) -> str:
    return make_token(user)


@pytest.fixture
def researcher(transactional_db: None) -> User:
    return make_user(username="researcher")


@pytest.fixture
def cli(live_server: Any, researcher: User, tmp_path: Path) -> Cli:
    return Cli(live_server.url, token_for(researcher), tmp_path / "yoyaku-config", {})


@pytest.fixture
def proxy(live_server: Any) -> Iterator[FaultProxy]:
    parts = urlsplit(live_server.url)
    server = FaultProxy(parts.hostname or "127.0.0.1", parts.port or 80)
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _no_faults() -> Iterator[None]:
    faults.clear()
    yield
    faults.clear()


@pytest.fixture
def grading(settings: Any) -> Iterator[Callable[[], None]]:
    """Grade every queued job in a thread of this process, through the worker's own task
    (`grade_job`) and the default sandbox grader, while the client waits.

    Skips where bubblewrap cannot run, unless YOYAKU_REQUIRE_BUBBLEWRAP is set (CI)."""
    from apps.grading.grader import grading_isolation
    from apps.grading.tasks import grade_job
    from apps.jobs.models import Job

    settings.GRADER = "apps.grading.grader.SandboxGrader"
    settings.GRADING_TIMEOUT = 30
    isolation = grading_isolation()
    if isolation.isolation != "bubblewrap":
        if os.environ.get("YOYAKU_REQUIRE_BUBBLEWRAP"):
            pytest.fail(f"bubblewrap is required here: {isolation.reason}")
        pytest.skip(f"no bubblewrap isolation on this machine: {isolation.reason}")
    stop = threading.Event()
    seen: set[str] = set()

    def work() -> None:
        try:
            while not stop.wait(0.2):
                for job_id in Job.objects.filter(status="queued").values_list("pk", flat=True):
                    if job_id not in seen:
                        seen.add(job_id)
                        grade_job(job_id)
        finally:
            connection.close()

    thread = threading.Thread(target=work, name="test-grader", daemon=True)
    thread.start()
    yield lambda: None
    stop.set()
    thread.join(timeout=60)


def set_quota(user: User, **limits: float) -> None:
    """Per-user limits (the policy row may already exist: admissions create it)."""
    from apps.quotas.models import QuotaPolicy

    QuotaPolicy.objects.update_or_create(user=user, defaults=limits)


def write_files(folder: Path, files: dict[str, bytes | str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        data = content.encode() if isinstance(content, str) else content
        (folder / name).write_bytes(data)
    return folder


HELLO_MAIN = (EXAMPLES / "hello" / "main.py").read_text()
HELLO_CONFIG = (EXAMPLES / "hello" / "config.yaml").read_text()


@pytest.fixture
def hostile() -> Iterator[Callable[[Handle], Hostile]]:
    """A hostile plain-HTTP server on loopback per call (`Hostile`), each closed at the end."""
    servers: list[Hostile] = []

    def make(handle: Handle) -> Hostile:
        servers.append(Hostile(handle))
        return servers[-1]

    yield make
    for server in servers:
        server.close()
