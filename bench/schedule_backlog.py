"""Schedule benchmark, grading-backlog mode: are plans on time while the task queue is full?

`python bench/schedule.py --backlog 250` (or `--backlog 0` for the same run without it):
the Procfile's three processes (web, worker, watcher, started with its commands), a loopback
receiver, and `--plans` point Lives due over `--spread` seconds while the django-q2 queue holds
`--backlog` slow tasks, topped up every half second. Each slow task stands for a grading: it
burns 0.3 s of CPU (a 0.3 s program) and writes a row before and after, so the worker competes
with the watcher for the cores and the database as a grading does. Reports the lateness at the
receiver (receipt - plan time) p50/p99/max per run and min/median/max over `--runs`, the
deliveries per webhook-id, and the load average beside each run. Target (§11.9): p99 ≤ 50 ms.

`--slow-kind sleep` makes the tasks sleep instead, leaving the cores free: the queue then
drains at the rate gradings did when plans waited in it (≈ 250 tasks in 40 s on 2 workers).
`--database sqlite` is the embedded default (a SQLite file, the ORM broker); `postgresql`
uses BENCH_DATABASE_URL and BENCH_REDIS_URL (see bench/schedule.py). `--plan-delivery queue`
measures django-q2 delivery (the plans' tasks wait in the same queue as the backlog).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.benchlib.databases import postgres_recreate, sqlite_url  # noqa: E402
from bench.benchlib.receiver import Receiver, percentile  # noqa: E402
from bench.benchlib.web import free_port  # noqa: E402

SLOW_TASK = "bench.schedule_backlog.slow_task"


def slow_task(seconds: float = 0.3, kind: str = "cpu") -> None:
    """A grading's stand-in, run by a django-q2 worker: a row written, `seconds` of CPU (or of
    sleep, `kind="sleep"`), a row written."""
    from apps.core.services import heartbeat_beat

    heartbeat_beat(name=f"bench-slow-{os.getpid()}")
    if kind == "sleep":
        time.sleep(seconds)
    else:
        end = time.process_time() + seconds
        while time.process_time() < end:
            sum(range(1000))
    heartbeat_beat(name=f"bench-slow-{os.getpid()}")


def procfile_commands() -> dict[str, str]:
    roles = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        if ":" in line and not line.startswith("#"):
            role, command = line.split(":", 1)
            roles[role.strip()] = command.strip()
    return roles


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f}/{five:.1f}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=250)
    parser.add_argument("--plans", type=int, default=100)
    parser.add_argument("--spread", type=float, default=25.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lead", type=float, default=15.0, help="seconds until the first plan")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--plan-delivery", choices=("watcher", "queue"), default="watcher")
    # sleep: 0.3 s tasks that leave the cores free (the queue drains at the rate it did when
    # plans waited in it: 250 tasks ≈ 40 s on 2 workers), to measure that wait on a busy host.
    parser.add_argument("--slow-kind", choices=("cpu", "sleep"), default="cpu")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))

    receiver = Receiver()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.test_settings",
        "SCHEDULE_WEBHOOK_ALLOWED_HOSTS": receiver.host,
        "EXECUTION_GUARD_TIME": "1",
        "PLAN_DELIVERY": args.plan_delivery,
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("Q_WORKERS", None)  # the Procfile's worker as it runs by default
    scratch = Path(tempfile.mkdtemp(prefix="yoyaku-bench-backlog-"))
    env["PROMETHEUS_MULTIPROC_DIR"] = str(scratch / "metrics")
    (scratch / "metrics").mkdir()
    drop = None
    if args.database == "sqlite":
        env["DATABASE_URL"] = sqlite_url(scratch / "db.sqlite3")
        env.pop("REDIS_URL", None)
    else:
        from bench.schedule import DB_URL, REDIS_URL, _psql, _redis_ok

        db_name = DB_URL.rsplit("/", 1)[1]
        postgres_recreate(DB_URL)
        env["DATABASE_URL"] = DB_URL
        if _redis_ok():
            env["REDIS_URL"] = REDIS_URL
        else:
            env.pop("REDIS_URL", None)

        def drop() -> None:
            _psql(f'DROP DATABASE IF EXISTS "{db_name}"')

    os.environ.clear()
    os.environ.update(env)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    import django

    django.setup()
    broker_name = "redis" if env.get("REDIS_URL") else "orm"
    print(
        f"database={args.database} broker={broker_name} delivery={args.plan_delivery} "
        f"backlog={args.backlog} ({args.slow_kind}) plans={args.plans} over {args.spread:g} s, "
        f"Procfile roles: {', '.join(procfile_commands())}",
        flush=True,
    )
    results: list[dict[str, Any]] = []
    try:
        results.extend(_one_run(args, env, receiver, run) for run in range(args.runs))
    finally:
        from django.db import connections

        connections.close_all()
        receiver.shutdown()
        if drop is not None:
            drop()
    _summary(results)
    return 0


def _one_run(
    args: argparse.Namespace, env: dict[str, str], receiver: Receiver, run: int
) -> dict[str, Any]:
    from django.contrib.auth.models import User
    from django.utils import timezone
    from django_q.brokers import get_broker
    from django_q.tasks import async_task

    from apps.core.selectors import heartbeat_get
    from apps.core.services import heartbeat_forget
    from apps.schedule.booking import life_spec_build
    from apps.schedule.selectors import WATCHER_HEARTBEAT
    from apps.schedule.services.booking import life_book

    broker = get_broker()
    broker.purge_queue()
    user, _ = User.objects.get_or_create(username=f"bench-backlog-{run}")
    port = free_port()
    procs = []
    for role, command in procfile_commands().items():
        cmd = command.replace("python ", f"{sys.executable} ").replace(
            "gunicorn ", f"{Path(sys.executable).parent / 'gunicorn'} "
        )
        procs.append(
            subprocess.Popen(
                ["sh", "-c", f"exec {cmd}"],
                cwd=ROOT,
                env={**env, "PORT": str(port), "WEB_CONCURRENCY": "2"},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
        print(f"  run {run + 1}: started {role}: {shlex.split(cmd)[0:3]}", flush=True)
    stop = threading.Event()
    topper = threading.Thread()
    try:
        deadline = time.time() + 60
        while time.time() < deadline and heartbeat_get(name=WATCHER_HEARTBEAT) is None:
            time.sleep(0.2)
        for _ in range(args.backlog):
            async_task(SLOW_TASK, 0.3, args.slow_kind, broker=broker)

        def top_up() -> None:
            from django.db import connections

            try:
                while not stop.wait(0.5):
                    missing = args.backlog - broker.queue_size()
                    for _ in range(max(missing, 0)):
                        async_task(SLOW_TASK, 0.3, args.slow_kind, broker=broker)
            finally:
                connections.close_all()

        topper = threading.Thread(target=top_up, daemon=True)
        if args.backlog:
            topper.start()
        # Past the next watcher tick (BOOKING_PLAN_WATCH_INTERVAL, 10 s by default) + booking.
        start = timezone.now() + dt.timedelta(seconds=args.lead)
        due: dict[str, float] = {}
        for i in range(args.plans):
            moment = start + dt.timedelta(seconds=args.spread * i / max(args.plans, 1))
            key = f"/r{run}/p{i}"
            spec = life_spec_build(
                {
                    "schedule_type": "point",
                    "birth_time": moment.isoformat(),
                    "birth_action": {"path": f"http://{receiver.host}{key}", "method": "POST"},
                }
            )
            life_book(user=user, spec=spec)
            due[key] = moment.timestamp()
        load_start = load()
        ran_before = _slow_tasks_run()
        end = start.timestamp() + args.spread
        deadline = end + (90 if args.plan_delivery == "queue" else 20)
        while time.time() < deadline and not all(k in receiver.first for k in due):
            time.sleep(0.25)
        late = [receiver.first[k] - t for k, t in due.items() if k in receiver.first]
        ran = _slow_tasks_run() - ran_before
        queued = broker.queue_size() if args.backlog else 0
        ids = [receiver.ids.get(k, Counter()) for k in due]
        result = {
            "p50": statistics.median(late) if late else float("nan"),
            "p99": percentile(late, 0.99) if late else float("nan"),
            "max": max(late) if late else float("nan"),
            "min": min(late) if late else float("nan"),
            "lost": sum(1 for k in due if k not in receiver.first),
            "duplicated": sum(1 for c in ids if sum(c.values()) > 1),
            "one_id": all(len(c) == 1 for c in ids if c),
            "load": f"{load_start} → {load()}",
            "queued_at_end": queued,
            "ran": ran,
        }
        print(
            f"  run {run + 1}: lateness p50 {result['p50'] * 1000:.1f} ms, p99 "
            f"{result['p99'] * 1000:.1f} ms, max {result['max'] * 1000:.1f} ms, min "
            f"{result['min'] * 1000:.1f} ms; undelivered {result['lost']}, delivered twice "
            f"{result['duplicated']}, one webhook-id each: {result['one_id']}; slow tasks run "
            f"{ran}, queued at the end {queued}; load (1/5 min) {result['load']}",
            flush=True,
        )
        return result
    finally:
        stop.set()
        if topper.is_alive():
            topper.join(10)
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait(5)
        broker.purge_queue()
        heartbeat_forget(name=WATCHER_HEARTBEAT)


def _slow_tasks_run() -> int:
    from django.db.models import Sum

    from apps.core.models import Heartbeat

    beats = Heartbeat.objects.filter(name__startswith="bench-slow-").aggregate(n=Sum("beats"))
    return int(beats["n"] or 0) // 2


def _summary(results: list[dict[str, Any]]) -> None:
    def span(name: str) -> str:
        values = [r[name] * 1000 for r in results]
        return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f} ms"

    print(f"over {len(results)} runs, min / median / max:")
    print(f"  lateness p50 {span('p50')}")
    print(f"  lateness p99 {span('p99')}  (target ≤ 50 ms)")
    print(f"  lateness max {span('max')}")
    lost = sum(r["lost"] for r in results)
    twice = sum(r["duplicated"] for r in results)
    print(f"  undelivered {lost}, delivered twice {twice}, loads {[r['load'] for r in results]}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
