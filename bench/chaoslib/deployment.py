"""The deployment: the web, worker and watcher processes of the run."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench.chaoslib.common import PYTHON, ROOT
from bench.chaoslib.servers import Servers


@dataclass
class Proc:
    name: str
    kind: str
    argv: list[str]
    port: int = 0
    popen: subprocess.Popen[bytes] | None = None
    starts: int = 0


class Deployment:
    def __init__(self, servers: Servers, run_dir: Path, env: dict[str, str]) -> None:
        self.servers = servers
        self.run_dir = run_dir
        self.env = env
        self.procs: dict[str, Proc] = {}
        self.lock = threading.Lock()

    def manage(self, *args: str, timeout: float = 300) -> str:
        done = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
        return done.stdout

    def add(self, name: str, kind: str, argv: list[str], port: int = 0) -> None:
        self.procs[name] = Proc(name=name, kind=kind, argv=argv, port=port)

    def start(self, name: str) -> None:
        proc = self.procs[name]
        out = (self.run_dir / f"{name}.log").open("ab")
        proc.popen = subprocess.Popen(
            proc.argv,
            cwd=ROOT,
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        proc.starts += 1

    def signal(self, name: str, signum: int) -> None:
        proc = self.procs[name]
        if proc.popen is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.popen.pid, signum)

    def kill(self, name: str) -> None:
        """SIGKILL the process and everything it started (its session's group)."""
        proc = self.procs[name]
        self.signal(name, signal.SIGKILL)
        if proc.popen is not None:
            proc.popen.wait()

    def of_kind(self, kind: str) -> list[str]:
        return [name for name, proc in self.procs.items() if proc.kind == kind]

    def group_of(self, pid: int) -> str | None:
        try:
            pgid = os.getpgid(pid)
        except ProcessLookupError:
            return None
        for name, proc in self.procs.items():
            if proc.popen is not None and proc.popen.pid == pgid:
                return name
        return None

    def stop_all(self) -> None:
        for name in self.procs:
            self.signal(name, signal.SIGCONT)
            self.signal(name, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for name, proc in self.procs.items():
            if proc.popen is None:
                continue
            try:
                proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill(name)
            self.signal(name, signal.SIGKILL)  # what the group's leader left behind
