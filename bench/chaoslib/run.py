"""The run: set-up, the load under faults, the drain, the report and the clean-up."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

from bench.chaoslib.checks import Checks
from bench.chaoslib.common import log, wait_for
from bench.chaoslib.faults import ChaosFaults
from bench.chaoslib.load import ChaosLoad


class Chaos(ChaosLoad, ChaosFaults):
    """One run: set-up, the load under faults, the drain, the report, the clean-up."""

    def drain(self, timeout: float) -> float:
        started = time.time()

        def quiet() -> bool:
            with self.servers.run_conn() as conn:
                jobs = conn.execute(
                    "SELECT count(*) FROM jobs_job WHERE status IN ('queued', 'running')"
                ).fetchone()
                plans = conn.execute(
                    "SELECT count(*) FROM schedule_plan WHERE state IN "
                    "('Standby', 'Preset', 'Running')"
                ).fetchone()
            return bool(jobs and plans and jobs[0] == 0 and plans[0] == 0)

        wait_for(quiet, timeout, interval=1.0)
        return time.time() - started

    def run(self) -> int:
        args = self.args
        seconds = args.minutes * 60
        self.setup()
        plan = self.fault_plan(seconds)
        log(f"load for {seconds:g} s; faults at " + ", ".join(f"{o:.0f}s {k}" for o, k in plan))
        self.load_started = time.time()
        last_booking = self.load_started + seconds - 35
        threads = [
            threading.Thread(target=self.user_loop, args=(f"chaos-user-{u}", index))
            for u in range(args.users)
            for index in range(2)
        ]
        threads += [
            threading.Thread(target=self.reviewer_loop, args=(f"chaos-reviewer-{r}",))
            for r in range(2)
        ]
        threads += [
            threading.Thread(target=self.booking_loop, args=(f"chaos-user-{u}", last_booking))
            for u in range(2)
        ]
        threads.append(threading.Thread(target=self.sampler_loop))
        injector = threading.Thread(target=self.injector_loop, args=(plan,))
        for thread in threads:
            thread.start()
        injector.start()
        time.sleep(max(0.0, self.load_started + seconds - time.time()))
        self.state.stop_load.set()
        injector.join()
        for thread in threads:
            thread.join()
        self.load_ended = time.time()
        log(f"load stopped; draining (at most {args.drain:g} s)")
        drained = self.drain(args.drain)
        log(f"drained in {drained:.0f} s")
        time.sleep(2)  # late recoveries and receivers settle
        # What the hourly cleanup does after its grace: delete stored uploads no row names
        # (a web process killed between storing an upload and committing its row).
        assert self.deployment is not None
        self.deployment.env["STORED_ORPHAN_GRACE_MINUTES"] = "0"
        swept = self.deployment.manage("cleanup", "--only", "orphan_files").strip()
        self.state.orphans_swept = swept.splitlines()[0] if swept else ""
        log(f"cleanup: {self.state.orphans_swept}")
        return self.report()

    def report(self) -> int:
        rows, figures = Checks(self).run()
        width = max(len(name) for name, _, _ in rows)
        print()
        print(f"{'invariant':<{width}}  {'checked':>8}  {'violations':>10}")
        print(f"{'-' * width}  {'-' * 8}  {'-' * 10}")
        for name, checked, violations in rows:
            print(f"{name:<{width}}  {checked:>8}  {len(violations):>10}")
        failed = [(name, v) for name, _, v in rows if v]
        for name, violations in failed:
            print(f"\n{name}:")
            for line in violations[:10]:
                print(f"  - {line}")
            if len(violations) > 10:
                print(f"  ... and {len(violations) - 10} more")
        print()
        for name, value in figures:
            print(f"{name:<{width}}  {value}")
        print()
        print(f"seed {self.seed} · logs {self.run_dir}")
        print("RESULT: " + ("FAIL" if failed else "PASS"), flush=True)
        return 1 if failed else 0

    def cleanup(self, *, keep_db: bool = False) -> None:
        if self.deployment is not None:
            self.deployment.stop_all()
        if self.moto is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.moto.pid, signal.SIGKILL)
            self.moto.wait()
        self.receivers.stop()
        if not self.servers.pg_ready():
            wait_for(self.servers.pg_ready, 60)
        if not self.servers.redis_ready():
            wait_for(self.servers.redis_ready, 30)
        if keep_db:
            log(f"database kept: {self.servers.url_for(self.servers.run_db)}")
        else:
            self.servers.drop_db()
        self.servers.redis_clear()
