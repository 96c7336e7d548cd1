"""The web server as shipped (config/gunicorn.py: heads and bodies read by an event loop, Django
in a worker thread) against gunicorn's sync workers, side by side in one run.

Both setups run at the same time, on one PostgreSQL database, and the loads alternate between
them step by step (the order flipping every step), so a change in the machine's load (it may be
shared) hits both alike:
- uploads (bench/upload.py's client, 5 workers each): per round one 100 MB upload, 10
  sequential 10 MB uploads and 5 concurrent clients x 10 files of 1 MB, on each server;
- job submission (bench/submit.py's load: 16 clients, a new idempotency key and a new draft
  submission each; BENCH_WORKERS workers each, the Procfile's default 2), in slices.
Prints, per figure, the ratio shipped / sync as min / median / max over the rounds (or slices)
and over the whole run.

Environment: BENCH_ROUNDS (upload rounds, default 3), BENCH_SLICES (submission slices, default
6), BENCH_REQUESTS (submissions per client per slice, default 20), BENCH_WORKERS (default 2),
BENCH_ONLY (`upload` or `submit`: that part alone), BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/yoyaku_bench_web, created and dropped by the run).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.benchlib.quick import quick  # noqa: E402

CHILD_FLAG = "YOYAKU_BENCH_WEB_CHILD"
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SLICES = int(os.environ.get("BENCH_SLICES", "6"))
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "20"))
WORKERS = int(os.environ.get("BENCH_WORKERS", "2"))
SETUPS: dict[str, str | None] = {"sync": "sync", "shipped": None}  # None: config/gunicorn.py's
MB = 1024 * 1024


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
    from bench.benchlib.databases import postgres_recreate

    postgres_recreate(os.environ["BENCH_DATABASE_URL"])
    try:
        submit._setup_django()
        from django.core.management import call_command
        from django.db import connections

        call_command("migrate", verbosity=0)
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(
            f"shipped (config/gunicorn.py) vs sync workers, PostgreSQL; {os.cpu_count()} CPUs, "
            f"load average before the run {load}",
            flush=True,
        )
        only = os.environ.get("BENCH_ONLY", "")
        ratios = _uploads(upload) if only in ("", "upload") else {}
        if only in ("", "submit"):
            big = {"max_concurrent_jobs": 1_000_000, "max_jobs_per_day": 1_000_000}
            per_user = 2 * (SLICES * REQUESTS + 5)
            users = submit.prepare_users(submit.CLIENTS, "web", per_user, **big)
            connections.close_all()
            ratios.update(_submissions(submit, users))
        print("shipped / sync: min / median / max per step, and over the whole run")
        for figure, (steps, whole) in ratios.items():
            print(
                f"  {figure:<22} {min(steps):.2f} / {statistics.median(steps):.2f} / "
                f"{max(steps):.2f}   whole {whole:.2f}"
            )
    finally:
        from django.db import connections

        connections.close_all()
        submit._psql_admin(f'DROP DATABASE IF EXISTS "{submit._db_name()}"')
    return 0


def _alternate(step: int, action: Callable[[str], float]) -> dict[str, float]:
    """`action(setup)` for both setups, the order flipping with `step`."""
    order = list(SETUPS) if step % 2 == 0 else list(reversed(SETUPS))
    return {name: action(name) for name in order}


def _uploads(upload: ModuleType) -> dict[str, tuple[list[float], float]]:
    """Upload rates (MB/s, files/s) per round; ratios shipped / sync."""
    work = Path(tempfile.mkdtemp(prefix="yoyaku-bench-web-"))
    servers: dict[str, Any] = {}
    try:
        data = work / "data"
        data.mkdir()
        # The quick mode's files are 1/64 of the sizes (its MB/s figures are not comparable).
        unit = MB // 64 if quick() else MB
        big = upload.make_file(data / "big.bin", 100 * unit)
        ten = upload.make_file(data / "ten.bin", 10 * unit)
        one = upload.make_file(data / "one.bin", unit)
        ports = {}
        for name, worker_class in SETUPS.items():
            folder = work / name
            folder.mkdir()
            process, ports[name], token, _ = upload.start_server(folder, worker_class)
            servers[name] = process
        # One database: each start replaces the bench user's token, so the last one serves both.
        clients = {name: upload.Client(port, token) for name, port in ports.items()}
        targets = {name: clients[name].create("main.py", one) for name in SETUPS}
        totals: dict[str, dict[str, list[float]]] = {
            figure: {name: [] for name in SETUPS}
            for figure in (
                "upload 100 MB (MB/s)",
                "upload 10x10 MB (MB/s)",
                "upload 5x10x1 MB (f/s)",
            )
        }
        sequence = 0

        def timed(call: Callable[[], None]) -> float:
            started = time.perf_counter()
            call()
            return time.perf_counter() - started

        def add(name: str, source: Path) -> None:
            nonlocal sequence
            sequence += 1
            status, body = clients[name].add(targets[name], f"f{sequence}.py", source)
            assert status == 201, body

        def concurrent(name: str) -> None:
            fresh = [clients[name].create("main.py", one) for _ in range(5)]

            def run(submission: str) -> None:
                for i in range(10):
                    status, body = clients[name].add(submission, f"c{i}.py", one)
                    assert status == 201, body

            threads = [threading.Thread(target=run, args=(s,)) for s in fresh]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

        def one_big(name: str) -> float:
            return timed(lambda: add(name, big))

        def ten_sequential(name: str) -> float:
            def run() -> None:
                for _ in range(10):
                    add(name, ten)

            return timed(run)

        def five_clients(name: str) -> float:
            return timed(lambda: concurrent(name))

        loads = (
            ("upload 100 MB (MB/s)", one_big, 100.0),
            ("upload 10x10 MB (MB/s)", ten_sequential, 100.0),
            ("upload 5x10x1 MB (f/s)", five_clients, 50.0),
        )
        for step in range(ROUNDS):
            for figure, action, amount in loads:
                for name, seconds in _alternate(step, action).items():
                    totals[figure][name].append(amount / seconds)
            print(f"upload round {step + 1}: " + _show(totals, step), flush=True)
        return {figure: _ratios(by_setup) for figure, by_setup in totals.items()}
    finally:
        for process in servers.values():
            process.terminate()
            process.wait(15)
        shutil.rmtree(work, ignore_errors=True)


def _submissions(submit: ModuleType, users: list[Any]) -> dict[str, tuple[list[float], float]]:
    """Job submissions per second per slice; ratio shipped / sync."""
    servers = {
        name: submit.Server(metrics=False, worker_class=worker_class, workers=WORKERS)
        for name, worker_class in SETUPS.items()
    }
    try:
        # Submissions [0, half) go to sync, [half, 2 x half) to shipped; 5 of each warm up.
        half = SLICES * REQUESTS + 5
        base = {name: index * half for index, name in enumerate(SETUPS)}
        for name, server in servers.items():
            warm = [
                [("/api/jobs/", tok, {"submission_id": sids[base[name] + i]}) for i in range(5)]
                for _, tok, sids in users
            ]
            submit.run_load(server.port, warm)
        rates: dict[str, dict[str, list[float]]] = {"submit (jobs/s)": {n: [] for n in SETUPS}}

        def slice_rate(name: str, step: int) -> float:
            first = base[name] + 5 + step * REQUESTS
            work = [
                [
                    (
                        "/api/jobs/",
                        tok,
                        {"submission_id": sids[first + i], "idempotency_key": f"w-{first + i}"},
                    )
                    for i in range(REQUESTS)
                ]
                for _, tok, sids in users
            ]
            elapsed, latencies, results = submit.run_load(servers[name].port, work)
            assert all(status == 201 for status, _ in results), results[:3]
            return float(len(latencies) / elapsed)

        for step in range(SLICES):
            for name, rate in _alternate(step, partial(slice_rate, step=step)).items():
                rates["submit (jobs/s)"][name].append(rate)
            print(f"submit slice {step + 1}: " + _show(rates, step), flush=True)
        return {figure: _ratios(by_setup) for figure, by_setup in rates.items()}
    finally:
        for server in servers.values():
            server.stop()


def _show(totals: dict[str, dict[str, list[float]]], step: int) -> str:
    return "; ".join(
        f"{figure} " + ", ".join(f"{name} {values[step]:.1f}" for name, values in by_setup.items())
        for figure, by_setup in totals.items()
    )


def _ratios(by_setup: dict[str, list[float]]) -> tuple[list[float], float]:
    """Per-step ratios shipped / sync (rates: > 1 is faster), and the ratio of the means."""
    steps = [new / old for new, old in zip(by_setup["shipped"], by_setup["sync"], strict=True)]
    whole = statistics.mean(by_setup["shipped"]) / statistics.mean(by_setup["sync"])
    return steps, whole


if __name__ == "__main__":
    sys.exit(main())
