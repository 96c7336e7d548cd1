"""Pieces more than one benchmark script runs: a worker cluster started, waited on and
stopped, one isolated run of a trivial program through the product's whole per-grading
path (`apps.grading.isolation`), and the CPU time of a process group or of this process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from apps.grading.isolation import Limits, Outcome

ROOT = Path(__file__).resolve().parent.parent.parent


def wait_until(predicate: Callable[[], bool], timeout: float) -> float:
    """Seconds until `predicate` holds (polled every 20 ms); TimeoutError after `timeout`."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise TimeoutError("the cluster did not finish in time")
        time.sleep(0.02)
    return time.monotonic() - started


def isolated_run(*, bwrap: str | None, program: str, limits: Limits, python: str) -> Outcome:
    """One run of `program` (as main.py, given config.yaml) in a fresh input folder handed over
    to the sandbox, under bubblewrap with `limits`."""
    from apps.grading.isolation import (
        BUBBLEWRAP,
        input_folder,
        input_folder_hand_over,
        run_program,
    )

    with input_folder() as root:
        (root / "main.py").write_text(program)
        (root / "config.yaml").write_text("a: 1\n")
        input_folder_hand_over(root, isolation=BUBBLEWRAP)
        return run_program(
            isolation=BUBBLEWRAP,
            bwrap=bwrap,
            input_dir=root,
            program=["main.py", "config.yaml"],
            limits=limits,
            python=python,
        )


def cluster_stop(cluster: subprocess.Popen[bytes]) -> None:
    """Stop a worker cluster (its own process group): SIGTERM, then SIGKILL to the whole group
    if it has not exited within 30 s."""
    cluster.send_signal(signal.SIGTERM)
    try:
        cluster.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(cluster.pid, signal.SIGKILL)
        cluster.wait()


def cluster_start(*, stderr: IO[bytes] | int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    """A worker cluster (`manage.py qcluster`) in its own process group, with this process's
    environment; its output is dropped (stderr: unless given somewhere to go)."""
    return subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=dict(os.environ),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )


def process_group_cpu(pgid: int) -> float:
    """CPU seconds of a process group's live processes and the children they reaped
    (recycled workers, the sandboxes' launchers): user + system, own and reaped. The
    sandboxed program's own CPU reaches both this and `own_cpu` (2026-11-29: an isolated
    run counts about 3 ms in this process and 36 ms in its reaped children at load 8; the
    compiled runner, the sandbox's PID 1, reaps the program and bubblewrap waits for the
    runner), so both sides count it alike: the difference of the two figures is the
    platform's work around the same kind of program."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it exited meanwhile
        if int(fields[2]) == pgid:  # fields[0] is the state: pgrp is the 5th field of stat
            total += sum(int(value) for value in fields[11:15])
    return total / ticks


def own_cpu() -> float:
    """CPU seconds of this process and the children it reaped (the isolated runs)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _pid_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of one live process, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ServerBackends:
    """CPU seconds of the PostgreSQL server's backends of this process's database, other than
    this process's own: sampled (`sample`) from pg_stat_activity and /proc, each backend
    counted from its first sample (or from 0 if it started after the first), to its last. A
    backend that ends between two samples loses what it spent after the last one; the
    server's shared processes (WAL writer, checkpointer) are not counted. Nothing on SQLite."""

    def __init__(self) -> None:
        from django.db import connection

        self.enabled = connection.vendor == "postgresql"
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.started = False

    def sample(self) -> None:
        if not self.enabled:
            return
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid()"
            )
            pids = [row[0] for row in cursor.fetchall()]
        for pid in pids:
            cpu = _pid_cpu(pid)
            if cpu is None:
                continue
            self.first.setdefault(pid, cpu if not self.started else 0.0)
            self.last[pid] = cpu
        self.started = True

    def cpu(self) -> float:
        return sum(self.last[pid] - self.first[pid] for pid in self.last)
