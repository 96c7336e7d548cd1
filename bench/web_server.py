"""The web server as shipped (config/gunicorn.py: heads and bodies read by an event loop, Django
in a worker thread) against gunicorn's sync workers, side by side in one run.

Each round runs, for both setups one after the other (the order alternating between rounds):
- bench/upload.py's measures (SQLite in a temporary folder): one 100 MB upload, 10 sequential
  10 MB uploads, 5 concurrent clients x 20 files of 1 MB;
- job submission throughput (bench/submit.py's load: 16 clients, a new idempotency key and a
  new draft submission each, PostgreSQL), against a server with BENCH_WORKERS workers.
Prints each figure per round and the ratio new / sync as min / median / max over the rounds.

Environment: BENCH_ROUNDS (default 3), BENCH_WORKERS (default 2, the Procfile's
WEB_CONCURRENCY default), BENCH_REQUESTS (submissions per client per round, default 60),
BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/yoyaku_bench_web, created and
dropped by the run).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHILD_FLAG = "YOYAKU_BENCH_WEB_CHILD"
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
WORKERS = int(os.environ.get("BENCH_WORKERS", "2"))
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "60"))
SETUPS = {"sync": "sync", "shipped": None}  # None: the worker class of config/gunicorn.py
# (name, higher is better)
FIGURES = {
    "upload_big_s": False,
    "ten_sequential_s": False,
    "files_per_s": True,
    "submit_per_s": True,
}


def main() -> int:
    """Run in a fresh interpreter: Django is set up once per process, with the submit
    benchmark's settings (`make bench` runs every script in one process)."""
    if os.environ.get(CHILD_FLAG) != "1":
        env = {
            **os.environ,
            CHILD_FLAG: "1",
            "BENCH_DATABASE_URL": os.environ.get(
                "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/yoyaku_bench_web"
            ),
        }
        return subprocess.call([sys.executable, __file__], cwd=ROOT, env=env)
    return _run()


def _run() -> int:
    sys.path.insert(0, str(ROOT))
    from bench import submit, upload

    submit._psql_admin(f'DROP DATABASE IF EXISTS "{submit._db_name()}"')
    submit._psql_admin(f'CREATE DATABASE "{submit._db_name()}"')
    try:
        submit._setup_django()
        from django.core.management import call_command
        from django.db import connections

        call_command("migrate", verbosity=0)
        big = {"max_concurrent_jobs": 1_000_000, "max_jobs_per_day": 1_000_000}
        per_user = 2 * ROUNDS * (REQUESTS + 5)
        users = submit.prepare_users(submit.CLIENTS, "web", per_user, **big)
        connections.close_all()
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(
            f"{ROUNDS} rounds; {WORKERS} web workers; {os.cpu_count()} CPUs, load average "
            f"before the run {load}",
            flush=True,
        )
        results: dict[str, dict[str, list[float]]] = {
            name: {figure: [] for figure in FIGURES} for name in SETUPS
        }
        used = 0
        for round_no in range(ROUNDS):
            order = list(SETUPS) if round_no % 2 == 0 else list(reversed(SETUPS))
            for name in order:
                figures = upload.measure(SETUPS[name], report=False)
                figures["submit_per_s"] = _submit_rate(submit, SETUPS[name], users, used)
                used += REQUESTS + 5
                for figure in FIGURES:
                    results[name][figure].append(figures[figure])
                shown = ", ".join(f"{figure} {figures[figure]:.3f}" for figure in FIGURES)
                print(f"round {round_no + 1} {name:<7}: {shown}", flush=True)
        print("new / sync (min / median / max over the rounds; > 1 is faster for rates):")
        for figure, higher_better in FIGURES.items():
            ratios = [
                new / old
                for new, old in zip(
                    results["shipped"][figure], results["sync"][figure], strict=True
                )
            ]
            meaning = "rate" if higher_better else "time"
            print(
                f"  {figure:<17} ({meaning}) {min(ratios):.2f} / "
                f"{statistics.median(ratios):.2f} / {max(ratios):.2f}"
            )
    finally:
        from django.db import connections

        connections.close_all()
        submit._psql_admin(f'DROP DATABASE IF EXISTS "{submit._db_name()}"')
    return 0


def _submit_rate(
    submit: ModuleType, worker_class: str | None, users: list[Any], offset: int
) -> float:
    """Submissions per second from submit.CLIENTS clients, REQUESTS each (after 5 to warm)."""
    server = submit.Server(metrics=False, worker_class=worker_class, workers=WORKERS)
    try:
        warm = [
            [("/api/jobs/", tok, {"submission_id": sids[offset + i]}) for i in range(5)]
            for _, tok, sids in users
        ]
        submit.run_load(server.port, warm)
        work = [
            [
                (
                    "/api/jobs/",
                    tok,
                    {"submission_id": sids[offset + 5 + i], "idempotency_key": f"w-{offset}-{i}"},
                )
                for i in range(REQUESTS)
            ]
            for _, tok, sids in users
        ]
        elapsed, latencies, results = submit.run_load(server.port, work)
        assert all(status == 201 for status, _ in results), results[:3]
        return float(len(latencies) / elapsed)
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
