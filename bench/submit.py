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

Environment: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/yoyaku_bench_submit,
created and dropped by the run), BENCH_REQUESTS (per client, default 120), BENCH_WORKERS
(gunicorn workers, default 4), BENCH_ROUNDS (race rounds, default 5), BENCH_SLICES (how many
slices the loads alternate in, default 4), BENCH_METRICS_AA=1 (a calibration run: the "metrics on"
server starts with metrics off too, so the on/off ratio shows the noise of the comparison).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = 16
RACERS = 64
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "120"))
WORKERS = int(os.environ.get("BENCH_WORKERS", "4"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
SLICES = int(os.environ.get("BENCH_SLICES", "4"))
DB_URL = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/yoyaku_bench_submit"
)
SETTINGS = "bench.submit_support.settings"
CHILD_FLAG = "YOYAKU_BENCH_SUBMIT_CHILD"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _psql_admin(sql: str) -> None:
    url = urlparse(DB_URL)
    subprocess.run(
        [
            "psql",
            "-q",
            "-h",
            url.hostname or "127.0.0.1",
            "-p",
            str(url.port or 5432),
            "-U",
            url.username or "postgres",
            "-d",
            "postgres",
            "-c",
            sql,
        ],
        check=True,
        capture_output=True,
    )


def _db_name() -> str:
    return urlparse(DB_URL).path.lstrip("/")


def _setup_django() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    os.environ["DATABASE_URL"] = DB_URL
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


METRICS_TOKEN = "bench-metrics-token"  # noqa: S105 - a loopback benchmark's own server


class Server:
    def __init__(
        self,
        *,
        metrics: bool = True,
        metrics_dir: str = "",
        worker_class: str | None = None,
        workers: int = WORKERS,
    ) -> None:
        self.port = _free_port()
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": SETTINGS,
            "DATABASE_URL": DB_URL,
            "LOG_LEVEL": "ERROR",
            "DEBUG": "false",
            "METRICS_ENABLED": "true" if metrics else "false",
            "METRICS_TOKEN": METRICS_TOKEN,
        }
        if metrics_dir:
            env["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "config.wsgi",
                "-c",
                "config/gunicorn.py",
                "--bind",
                f"127.0.0.1:{self.port}",
                *(["--worker-class", worker_class] if worker_class else []),
                "--workers",
                str(workers),
                "--backlog",
                "512",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                status, _ = request(self.port, "GET", "/healthz", None, None)
                if status < 500:
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("gunicorn did not start")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()


def request(
    port: int, method: str, path: str, token: str | None, body: dict[str, Any] | None
) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json", "Connection": "close"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request(method, path, body=json.dumps(body) if body else None, headers=headers)
        response = conn.getresponse()
        data = response.read()
    finally:
        conn.close()
    return response.status, json.loads(data) if data else {}


def run_load(
    port: int, work: list[list[tuple[str, str, dict[str, Any]]]]
) -> tuple[float, list[float], list[tuple[int, dict[str, Any]]]]:
    """Each client sends its list of (path, token, body) in order. Returns elapsed, latencies."""
    latencies: list[float] = []
    results: list[tuple[int, dict[str, Any]]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(work) + 1)

    def client(items: list[tuple[str, str, dict[str, Any]]]) -> None:
        mine: list[float] = []
        answers = []
        barrier.wait()
        for path, token, body in items:
            start = time.perf_counter()
            answers.append(request(port, "POST", path, token, body))
            mine.append(time.perf_counter() - start)
        with lock:
            latencies.extend(mine)
            results.extend(answers)

    threads = [threading.Thread(target=client, args=(items,)) for items in work]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start, latencies, results


def summarize(name: str, elapsed: float, latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    p50 = statistics.median(ordered) * 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    rate = len(latencies) / elapsed
    print(f"  {name:<9} {rate:8.1f} req/s   p50 {p50:6.1f} ms   p99 {p99:6.1f} ms", flush=True)
    return {"rate": rate, "p50": p50, "p99": p99}


def prepare_users(count: int, prefix: str, per_user_submissions: int, **policy: Any) -> list[Any]:
    """Users with tokens, a quota policy and draft submissions (complete file lists)."""
    from django.contrib.auth.models import User

    from apps.core.models_utils import new_hex_id
    from apps.core.services import token_create
    from apps.quotas.models import QuotaPolicy
    from apps.submissions.models import Submission, SubmissionFile, filename_fold

    users = []
    for i in range(count):
        user = User.objects.create_user(username=f"{prefix}{i}-{new_hex_id()[:6]}")
        token = token_create(user=user, name="bench").token
        QuotaPolicy.objects.create(user=user, **policy)
        submissions = Submission.objects.bulk_create(
            [Submission(owner=user) for _ in range(per_user_submissions)]
        )
        SubmissionFile.objects.bulk_create(
            [
                # bulk_create skips save(), which fills name_folded.
                SubmissionFile(
                    submission=s,
                    filename=name,
                    name_folded=filename_fold(name),
                    size=1,
                    sha256="0" * 64,
                    storage_name=name,
                )
                for s in submissions
                for name in ("main.py", "config.yaml")
            ]
        )
        users.append((user, token, [s.pk for s in submissions]))
    return users


def _metric_calls_cost(rounds: int = 20000) -> float:
    """Seconds per submission spent in its metric calls, in multiprocess mode (files)."""
    code = (
        "import os, tempfile, time\n"
        "os.environ['PROMETHEUS_MULTIPROC_DIR'] = tempfile.mkdtemp()\n"
        "from prometheus_client import Counter, Histogram\n"
        "r = Counter('yoyaku_r_total', '', ['route', 'method', 'status_class'], registry=None)\n"
        "d = Histogram('yoyaku_d_seconds', '', ['route', 'method'], registry=None)\n"
        "j = Counter('yoyaku_j_total', '', ['outcome'], registry=None)\n"
        "t = time.perf_counter()\n"
        f"for _ in range({rounds}):\n"
        "    r.labels('jobs', 'POST', '2xx').inc()\n"
        "    d.labels('jobs', 'POST').observe(0.01)\n"
        "    j.labels('created').inc()\n"
        f"print((time.perf_counter() - t) / {rounds})\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return float(out.strip())


def _scraped(port: int, name: str, outcome: str) -> float:
    """One sample of the server's /metrics (summed over its workers)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    wanted = f'{name}{{outcome="{outcome}"}} '
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(wanted))


def race_quota(port: int) -> tuple[int, int]:
    """64 clients, one user, limit 5, distinct keys: (worst overshoot, total 201s beyond 5)."""
    from apps.jobs.models import ACTIVE_JOB_STATUSES, Job

    worst = extra = 0
    for round_no in range(ROUNDS):
        ((user, token, submission_ids),) = prepare_users(
            1, f"quota{round_no}-", RACERS, max_concurrent_jobs=5, max_jobs_per_day=100000
        )
        work = [
            [("/api/jobs/", token, {"submission_id": sid, "idempotency_key": f"q-{i}"})]
            for i, sid in enumerate(submission_ids)
        ]
        _, _, results = run_load(port, work)
        created = sum(1 for status, _ in results if status == 201)
        active = Job.objects.filter(owner=user, status__in=ACTIVE_JOB_STATUSES).count()
        worst = max(worst, active - 5)
        extra += max(0, created - 5)
        assert all(s == 201 or b.get("code") == "quota_exceeded" for s, b in results), results
    return worst, extra


def race_key(port: int) -> int:
    """64 clients, one user, one key: jobs beyond the first, summed over the rounds."""
    from apps.jobs.models import Job

    duplicates = 0
    for round_no in range(ROUNDS):
        ((user, token, (submission_id,)),) = prepare_users(
            1, f"key{round_no}-", 1, max_concurrent_jobs=1000, max_jobs_per_day=100000
        )
        body = {"submission_id": submission_id, "idempotency_key": "one-key"}
        _, _, results = run_load(port, [[("/api/jobs/", token, body)] for _ in range(RACERS)])
        duplicates += Job.objects.filter(owner=user).count() - 1
        ok = {200, 201}
        assert all(
            s in ok or b.get("code") == "idempotency_request_in_progress" for s, b in results
        ), results
    return duplicates


def main() -> int:
    """Run the benchmark in a fresh interpreter: `make bench` runs every script in one process,
    and Django can be set up only once per process (with this benchmark's own settings)."""
    if os.environ.get(CHILD_FLAG) != "1":
        return subprocess.call(
            [sys.executable, __file__], cwd=ROOT, env={**os.environ, CHILD_FLAG: "1"}
        )
    return _run()


def _run() -> int:
    _psql_admin(f'DROP DATABASE IF EXISTS "{_db_name()}"')
    _psql_admin(f'CREATE DATABASE "{_db_name()}"')
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
        connections.close_all()
        return 0 if overshoot == 0 and extra == 0 and duplicates == 0 else 1
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
