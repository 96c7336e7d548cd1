"""Job submission throughput and latency against gunicorn + PostgreSQL on loopback.

One run measures, with 16 concurrent clients (one user each):
  - baseline: a plain DRF endpoint that inserts one row (mounted only for this benchmark),
  - submit:   POST /api/jobs/ with a new idempotency key (and a new draft submission) each,
  - replay:   POST /api/jobs/ repeating those keys (answered from the key, no new job),
and prints throughput and p50/p99 latency with ratios to the baseline. The same submit and
replay loads also run, interleaved slice by slice, against a second gunicorn started with
METRICS_ENABLED=false: the ratio on/off is what the Prometheus metrics cost (target: at most
5 % of throughput), and a scrape of the first server checks that its jobs were counted. Then 64
clients race on one user's concurrent-job quota (limit 5) and on one key, and the overshoot /
duplicate counts are read back from the database (both must be 0).

The phase run (bench/submit_support/phase.py), on the server with metrics: job submissions to
the `dev` phase of the example `digits` bundle (applied with generous team limits, participants
approved) against as many plain submissions, BENCH_PHASE_ROUNDS rounds (default 5, at least 3)
of 16 clients x BENCH_PHASE_REQUESTS (default 30) each way: the throughput ratio phase/plain
(target >= 0.9); then 64 clients spread over the 3 members of one team race its `per_day` limit
(5) on a second copy of the bundle: the jobs admitted must equal the limit exactly.
BENCH_PHASE_ONLY=1 runs only this part.

Environment: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/yoyaku_bench_submit,
created and dropped by the run), BENCH_REQUESTS (per client, default 120), BENCH_WORKERS
(gunicorn workers, default 4), BENCH_ROUNDS (race rounds, default 5), BENCH_SLICES (how many
slices the loads alternate in, default 4), BENCH_METRICS_AA=1 (a calibration run: the "metrics on"
server starts with metrics off too, so the on/off ratio shows the noise of the comparison).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# bench/web_server.py reaches the harness and the users through this module too.
from bench.submit_support.harness import (  # noqa: E402
    CLIENTS,
    RACERS,
    REQUESTS,
    ROUNDS,
    SLICES,
    WORKERS,
    Server,
    _db_name,
    _metric_calls_cost,
    _psql_admin,
    _scraped,
    _setup_django,
    run_load,
    summarize,
)
from bench.submit_support.phase import (  # noqa: E402
    RACE_LIMIT,
    phase_only,
    prepare_challenges,
    race_team_limit,
    run_phase_load,
)
from bench.submit_support.races import prepare_users, race_key, race_quota  # noqa: E402

CHILD_FLAG = "YOYAKU_BENCH_SUBMIT_CHILD"


def main() -> int:
    """Run the benchmark in a fresh interpreter: `make bench` runs every script in one process,
    and Django can be set up only once per process (with this benchmark's own settings)."""
    if os.environ.get(CHILD_FLAG) != "1":
        return subprocess.call(
            [sys.executable, __file__], cwd=ROOT, env={**os.environ, CHILD_FLAG: "1"}
        )
    return _run()


def _run() -> int:
    if os.environ.get("BENCH_PHASE_ONLY") == "1":
        return phase_only()
    _psql_admin(f'DROP DATABASE IF EXISTS "{_db_name()}"')
    _psql_admin(f'CREATE DATABASE "{_db_name()}"')
    # Phase submissions store files: in a folder of this run (the servers inherit it).
    os.environ["MEDIA_ROOT"] = tempfile.mkdtemp(prefix="yoyaku-bench-media-")
    server: Server | None = None
    server_off: Server | None = None
    server_base: Server | None = None
    try:
        _setup_django()
        from django.core.management import call_command
        from django.db import connections

        call_command("migrate", verbosity=0)
        big = {"max_concurrent_jobs": 1_000_000, "max_jobs_per_day": 1_000_000}
        # Submissions [0, REQUESTS) go to the server with metrics, [REQUESTS, 2 x REQUESTS)
        # to the one without; the last 10 warm both up.
        users = prepare_users(CLIENTS, "load", 2 * REQUESTS + 10, **big)
        prepare_challenges()
        connections.close_all()

        metrics_dir = tempfile.mkdtemp(prefix="yoyaku-bench-metrics-")
        calibration = os.environ.get("BENCH_METRICS_AA") == "1"
        # The baseline has a server of its own, so the two compared servers serve alike.
        server_base = Server(metrics=False)
        server = Server(metrics=not calibration, metrics_dir=metrics_dir)
        server_off = Server(metrics=False)
        port_base, port, port_off = server_base.port, server.port, server_off.port
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(
            f"gunicorn {WORKERS} workers (config/gunicorn.py), PostgreSQL, "
            f"{CLIENTS} clients x {REQUESTS} requests; {os.cpu_count()} CPUs, "
            f"load average before the run {load}",
            flush=True,
        )
        # Warm-up: every worker opens its database connection.
        warm: list[list[tuple[str, str, dict[str, Any]]]] = [
            [("/bench/baseline/", tok, {})] * 5 for _, tok, _ in users
        ]
        run_load(port_base, warm)
        for some_port, offset in ((port, 0), (port_off, 5)):
            warm_jobs = [
                [("/api/jobs/", tok, {"submission_id": sids[-1 - offset - i]}) for i in range(5)]
                for _, tok, sids in users
            ]
            run_load(some_port, warm_jobs)

        # The loads alternate in SLICES short slices, so a change in the machine's load (it may
        # be shared) hits them alike; times and latencies are summed per load.
        names = ("baseline", "submit", "replay", "submit-off", "replay-off")
        totals: dict[str, tuple[float, list[float]]] = {name: (0.0, []) for name in names}
        step = -(-REQUESTS // SLICES)
        for start in range(0, REQUESTS, step):
            part = range(start, min(REQUESTS, start + step))
            baseline_work: list[list[tuple[str, str, dict[str, Any]]]] = [
                [("/bench/baseline/", tok, {}) for _ in part] for _, tok, _ in users
            ]

            def submits(shift: int, part: range = part) -> list[list[tuple[str, str, Any]]]:
                return [
                    [
                        (
                            "/api/jobs/",
                            tok,
                            {
                                "submission_id": sids[shift + i],
                                "idempotency_key": f"k-{sids[shift + i]}",
                            },
                        )
                        for i in part
                    ]
                    for _, tok, sids in users
                ]

            on, off = submits(0), submits(REQUESTS)
            loads = [
                ("submit", port, on, 201),
                ("submit-off", port_off, off, 201),
                ("replay", port, on, 200),
                ("replay-off", port_off, off, 200),
            ]
            if (start // step) % 2:
                # Every other slice runs "off" first, so neither side always follows the other.
                loads = [loads[1], loads[0], loads[3], loads[2]]
            for name, target, work, expected in [
                ("baseline", port_base, baseline_work, 201),
                *loads,
            ]:
                elapsed, lat, results = run_load(target, work)
                assert all(status == expected for status, _ in results), {s for s, _ in results}
                total, latencies = totals[name]
                totals[name] = (total + elapsed, latencies + lat)
        base, sub, rep, sub_off, rep_off = (summarize(name, *totals[name]) for name in names)
        print(
            f"  ratios: submit/baseline throughput {sub['rate'] / base['rate']:.2f} "
            f"(target >= 0.50), replay/baseline {rep['rate'] / base['rate']:.2f}; "
            f"submit p99 {sub['p99']:.0f} ms (target <= 100)",
            flush=True,
        )
        print(
            f"  metrics on/off: submit throughput {sub['rate'] / sub_off['rate']:.3f}, replay "
            f"{rep['rate'] / rep_off['rate']:.3f} (target >= 0.95: metrics cost <= 5 %); "
            f"submit p50 {sub['p50']:.1f} vs {sub_off['p50']:.1f} ms",
            flush=True,
        )
        per_request = _metric_calls_cost()
        print(
            f"  the metric calls of one submission (HTTP counter + histogram, the submission "
            f"counter), timed in-process: {per_request * 1e6:.1f} us = "
            f"{per_request / (1 / sub_off['rate']) * 100:.2f} % of the time per submission at "
            f"the measured throughput",
            flush=True,
        )
        if calibration:
            print("  (calibration: both compared servers ran with metrics off)", flush=True)
        else:
            counted = _scraped(port, "yoyaku_job_submissions_total", "created")
            replays = _scraped(port, "yoyaku_job_submissions_total", "replay")
            print(
                f"  /metrics of the server with metrics: {counted:.0f} jobs created, "
                f"{replays:.0f} replays (sent: {CLIENTS * (REQUESTS + 5)} and "
                f"{CLIENTS * REQUESTS})",
                flush=True,
            )
            assert counted == CLIENTS * (REQUESTS + 5)
            assert replays == CLIENTS * REQUESTS

        overshoot, extra = race_quota(port)
        duplicates = race_key(port)
        print(
            f"  races ({ROUNDS} rounds x {RACERS} clients): quota overshoot {overshoot} "
            f"(extra 201s {extra}), one-key duplicates {duplicates} (targets 0)",
            flush=True,
        )
        ratios = run_phase_load(port)
        created, stored = race_team_limit(port)
        connections.close_all()
        exact = all(n == RACE_LIMIT for n in created + stored)
        return 0 if overshoot == 0 and extra == 0 and duplicates == 0 and exact and ratios else 1
    finally:
        for running in (server, server_off, server_base):
            if running is not None:
                running.stop()
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # noqa: S110 - Django may not be set up yet
            pass
        _psql_admin(f'DROP DATABASE IF EXISTS "{_db_name()}"')


if __name__ == "__main__":
    code = main()
    if code:
        sys.exit(code)
