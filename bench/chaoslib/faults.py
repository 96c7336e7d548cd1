"""The faults: the plan on the run's seed and one injector per kind."""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
from collections.abc import Callable

import psycopg

from bench.chaoslib.base import ChaosBase
from bench.chaoslib.common import FAULT_KINDS, WATCHER_LEASE, log, wait_for
from bench.chaoslib.state import Fault


class ChaosFaults(ChaosBase):
    """The fault plan, its injector thread and one `fault_<kind>` method per kind."""

    def fault_plan(self, seconds: float) -> list[tuple[float, str]]:
        """(offset, kind), sorted. --ci: one of each kind; else one fault every ~25 s with every
        kind present, Redis twice, PostgreSQL once near the middle."""
        start, end = 0.12 * seconds, 0.85 * seconds
        if self.args.ci:
            kinds = [*FAULT_KINDS, "pg_restart"]
            self.rng.shuffle(kinds)
            step = (end - start) / len(kinds)
            return [(start + i * step, kind) for i, kind in enumerate(kinds)]
        count = max(len(FAULT_KINDS) + 2, int((end - start) / 25))
        kinds = [*FAULT_KINDS, "redis_restart"]
        while len(kinds) < count - 1:
            kinds.append(
                self.rng.choice(["web_kill", "worker_kill", "watcher_kill", "watcher_stop"])
            )
        self.rng.shuffle(kinds)
        kinds.insert(len(kinds) // 2, "pg_restart")
        step = (end - start) / len(kinds)
        return [(start + (i + self.rng.uniform(0.0, 0.5)) * step, k) for i, k in enumerate(kinds)]

    def injector_loop(self, plan: list[tuple[float, str]]) -> None:
        for offset, kind in plan:
            wait = self.load_started + offset - time.time()
            if self.state.stop_load.wait(max(0.0, wait)):
                return
            fault = Fault(kind=kind, at=time.time())
            try:
                getattr(self, f"fault_{kind}")(fault)
            except Exception as exc:
                fault.detail = f"injector error: {exc!r}"
            with self.state.lock:
                self.state.faults.append(fault)
            log(f"fault {kind} {fault.target} {fault.detail}".rstrip())

    def recover_later(self, fault: Fault, check: Callable[[], bool], timeout: float) -> None:
        def watch() -> None:
            if wait_for(check, timeout, interval=0.25):
                fault.recovered_at = time.time()

        threading.Thread(target=watch, daemon=True).start()

    def fault_web_kill(self, fault: Fault) -> None:
        assert self.deployment is not None
        name = self.rng.choice(self.deployment.of_kind("web"))
        fault.target = name
        self.deployment.kill(name)
        fault.at = time.time()
        self.deployment.start(name)
        port = self.deployment.procs[name].port
        self.recover_later(fault, lambda: self.healthy(port), 120)

    def grading_now(self) -> list[tuple[str, str]]:
        """(job id, worker name) of the gradings running now."""
        with self.servers.run_conn() as conn:
            rows = conn.execute(
                "SELECT job_id, worker FROM grading_gradingattempt WHERE outcome = 'running'"
            ).fetchall()
        return [(str(job), str(worker)) for job, worker in rows]

    def fault_worker_kill(self, fault: Fault) -> None:
        """Kill a cluster while one of its workers grades (waits up to 20 s for one)."""
        assert self.deployment is not None
        deadline = time.time() + 20
        victim: tuple[str, str] | None = None
        while time.time() < deadline and victim is None:
            with contextlib.suppress(psycopg.Error):
                for job_id, worker in self.grading_now():
                    name = self.deployment.group_of(int(worker.rpartition(":")[2] or 0))
                    if name is not None:
                        victim = (job_id, name)
                        break
            if victim is None:
                time.sleep(0.2)
        if victim is None:
            name = self.rng.choice(self.deployment.of_kind("worker"))
            fault.detail = "(no grading was running)"
            job_id = ""
        else:
            job_id, name = victim
            fault.detail = f"mid-grade of job {job_id}"
        fault.target = name
        self.deployment.kill(name)
        fault.at = time.time()
        self.deployment.start(name)
        if job_id:
            self.recover_later(fault, lambda: self.job_finished(job_id), 600)
        else:
            fault.recovered_at = fault.at

    def job_finished(self, job_id: str) -> bool:
        with self.servers.run_conn() as conn:
            row = conn.execute("SELECT status FROM jobs_job WHERE id = %s", (job_id,)).fetchone()
        return row is not None and row[0] in ("completed", "failed", "cancelled")

    def claimed_by(self, name: str) -> list[int]:
        """The plans the watcher process `name` has armed (its owner is host:pid)."""
        assert self.deployment is not None
        popen = self.deployment.procs[name].popen
        if popen is None:
            return []
        owner = f"{socket.gethostname()}:{popen.pid}"
        with contextlib.suppress(psycopg.Error), self.servers.run_conn() as conn:
            rows = conn.execute(
                "SELECT id FROM schedule_plan WHERE state = 'Preset' AND lease_owner = %s",
                (owner,),
            ).fetchall()
            return [int(row[0]) for row in rows]
        return []

    def fault_watcher_kill(self, fault: Fault) -> None:
        assert self.deployment is not None
        name = self.rng.choice(self.deployment.of_kind("watcher"))
        fault.target = name
        fault.plans = self.claimed_by(name)
        self.deployment.kill(name)
        fault.at = time.time()
        self.deployment.start(name)
        fault.detail = f"{len(fault.plans)} plans armed"

    def fault_watcher_stop(self, fault: Fault) -> None:
        assert self.deployment is not None
        name = self.rng.choice(self.deployment.of_kind("watcher"))
        pause = WATCHER_LEASE + 4
        fault.target = name
        fault.plans = self.claimed_by(name)
        fault.detail = (
            f"stopped {pause:g} s (lease {WATCHER_LEASE:g} s), {len(fault.plans)} plans armed"
        )
        self.deployment.signal(name, signal.SIGSTOP)
        time.sleep(pause)
        self.deployment.signal(name, signal.SIGCONT)

    def fault_redis_restart(self, fault: Fault) -> None:
        fault.target = "redis"
        self.servers.redis_restart()
        back = time.time()

        def graded_after() -> bool:
            with self.servers.run_conn() as conn:
                row = conn.execute(
                    "SELECT count(*) FROM grading_gradingattempt a JOIN jobs_job j "
                    "ON j.id = a.job_id WHERE j.created_at > to_timestamp(%s) "
                    "AND a.outcome <> 'running'",
                    (back,),
                ).fetchone()
            return row is not None and row[0] > 0

        self.recover_later(fault, graded_after, 300)

    def fault_pg_restart(self, fault: Fault) -> None:
        fault.target = "postgresql"
        started = time.time()
        self.servers.pg_restart()
        wait_for(self.servers.pg_ready, 60)
        ports = list(self.web_ports)
        ok = wait_for(lambda: all(self.healthy(p) for p in ports), 120, interval=0.1)
        ended = time.time()
        # Requests sent just before the restart may be answered just after it.
        self.state.pg_window = (started - 1.0, ended + 2.0)
        if ok:
            fault.recovered_at = ended
