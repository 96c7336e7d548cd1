"""bench/submit.py's settings from the environment, its database, its gunicorn servers and the
load that clients send them (one thread per client), with the figures it prints."""

from __future__ import annotations

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent.parent
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
