"""Schedule benchmark: how late do webhook reservations fire, against django-q2's own scheduler.

One run, against PostgreSQL (+ Redis when available) with a real `run_plan_watcher`, a real
django-q2 cluster and a loopback HTTP receiver, measures:
  - spread:   N point Lives due over S seconds → lateness (receipt time - plan time) p50/p99/max;
  - baseline: in the same window, django-q2's own ONCE schedules calling the same receiver →
              their lateness (its scheduler wakes about every 30 s);
  - burst:    B Lives due in the same second → time until the last one is delivered;
  - history:  the watcher's tick time with H1 vs H2 finished Lives in the tables.

Defaults are scaled down so the run stays under ~2 minutes: 300 Lives over 30 s (issue: 1,000
over 60 s), a burst of 300 (issue: 1,000), history 1,000 vs 100,000 (issue: 1,000,000). The
full figures: `python bench/schedule.py --lives 1000 --spread 60 --burst 1000 --history-large
1000000`. Targets: p99 ≤ 1 s, burst drained ≤ 10 s, tick(H2) ≤ 2 x tick(H1).

`--backlog N` runs the grading-backlog mode instead (bench/schedule_backlog.py): plans due
while django-q2's queue holds N slow tasks, with the Procfile's processes.

Environment: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/yoyaku_bench_schedule,
created and dropped by the run), BENCH_REDIS_URL (default redis://127.0.0.1:6379/14; empty = the
ORM broker).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.benchlib.databases import postgres_recreate, psql_admin, redis_reachable  # noqa: E402
from bench.benchlib.peers import Peers  # noqa: E402
from bench.benchlib.receiver import Receiver, lateness_line, percentile  # noqa: E402

DB_URL = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/yoyaku_bench_schedule"
)
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")


def q2_hit(url: str) -> None:
    """The django-q2 ONCE schedules' function: one POST to the receiver (runs in a worker)."""
    import httpx

    httpx.post(url, content=b"{}", timeout=5)


def _psql(sql: str) -> None:
    psql_admin(DB_URL, sql)


def _redis_ok() -> bool:
    return redis_reachable(REDIS_URL)


def main() -> int:
    own_argv = sys.argv[0].endswith("schedule.py")
    if own_argv and "--backlog" in sys.argv:
        sys.path.insert(0, str(ROOT))
        from bench.schedule_backlog import main as backlog_main

        return backlog_main(sys.argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lives", type=int, default=300)
    parser.add_argument("--spread", type=float, default=30.0)
    parser.add_argument("--q2-schedules", type=int, default=20)
    parser.add_argument("--burst", type=int, default=300)
    parser.add_argument("--history-small", type=int, default=1_000)
    parser.add_argument("--history-large", type=int, default=100_000)
    parser.add_argument(
        "--peer-jobs", type=int, default=100, help="Celery ETA / APScheduler jobs in the window"
    )
    parser.add_argument("--lead", type=float, default=12.0, help="seconds until the first plan")
    args = parser.parse_args(sys.argv[1:] if own_argv else [])

    receiver = Receiver()
    host = receiver.host
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.test_settings",
        "DATABASE_URL": DB_URL,
        "SCHEDULE_WEBHOOK_ALLOWED_HOSTS": host,
        "EXECUTION_GUARD_TIME": "1",
        "BOOKING_PLAN_WATCH_INTERVAL": "1000",
        "Q_WORKERS": "4",
        "LOG_LEVEL": "WARNING",
    }
    redis = _redis_ok()
    if redis:
        env["REDIS_URL"] = REDIS_URL
    else:
        env.pop("REDIS_URL", None)
    os.environ.update({k: v for k, v in env.items() if k != "PATH"})
    if not redis:
        os.environ.pop("REDIS_URL", None)
    db_name = urlparse(DB_URL).path.lstrip("/")
    postgres_recreate(DB_URL)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True
        )
        if redis:
            import redis as redis_lib

            redis_lib.Redis.from_url(REDIS_URL).flushdb()
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        return _run(args, env, host, receiver, procs, broker="redis" if redis else "orm")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        receiver.shutdown()
        from django.db import connections

        connections.close_all()
        _psql(f'DROP DATABASE IF EXISTS "{db_name}"')


def _run(
    args: argparse.Namespace,
    env: dict[str, str],
    host: str,
    receiver: Receiver,
    procs: list[subprocess.Popen[bytes]],
    *,
    broker: str,
) -> int:
    from django.contrib.auth.models import User

    from apps.schedule.booking import life_spec_build
    from apps.schedule.services.booking import life_book

    user = User.objects.create(username="bench")
    url = f"http://{host}"

    def book_at(moment: dt.datetime, key: str) -> None:
        spec = life_spec_build(
            {
                "schedule_type": "point",
                "birth_time": moment.isoformat(),
                "birth_action": {"path": f"{url}/plan/{key}", "method": "POST"},
            }
        )
        life_book(user=user, spec=spec)

    procs.extend(
        subprocess.Popen(
            [sys.executable, "manage.py", name],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name in ("qcluster", "run_plan_watcher")
    )
    print(f"broker={broker}  database=postgresql  watcher interval=1000 ms  workers=4", flush=True)
    peers = Peers(redis=broker == "redis") if args.peer_jobs else None
    try:
        return _measure(args, user, url, book_at, receiver, procs, peers)
    finally:
        if peers is not None:
            peers.stop()


def _measure(
    args: argparse.Namespace,
    user: Any,
    url: str,
    book_at: Callable[[dt.datetime, str], None],
    receiver: Receiver,
    procs: list[subprocess.Popen[bytes]],
    peers: Peers | None,
) -> int:
    from django.utils import timezone
    from django_q.models import Schedule

    # --- spread, with django-q2's ONCE schedules in the same window as the baseline --------
    start = timezone.now() + dt.timedelta(seconds=args.lead)
    due: dict[str, float] = {}
    # The peers' jobs first (a few ms to book them all): booked after the Lives, on a busy
    # machine they could be booked past their time and counted late.
    for i in range(args.peer_jobs if peers else 0):
        assert peers is not None
        moment = start + dt.timedelta(seconds=args.spread * i / args.peer_jobs)
        for suffix in peers.book(moment, f"{url}/peer/{i}").values():
            due[f"/peer/{i}{suffix}"] = moment.timestamp()
    for i in range(args.lives):
        moment = start + dt.timedelta(seconds=args.spread * i / args.lives)
        book_at(moment, f"s{i}")
        due[f"/plan/s{i}"] = moment.timestamp()
    for i in range(args.q2_schedules):
        moment = start + dt.timedelta(seconds=args.spread * i / max(args.q2_schedules, 1))
        Schedule.objects.create(
            name=f"bench-q2-{i}",
            func="bench.schedule.q2_hit",
            args=repr((f"{url}/q2/{i}",)),
            schedule_type=Schedule.ONCE,
            next_run=moment,
            repeats=1,
        )
        due[f"/q2/{i}"] = moment.timestamp()
    end = start.timestamp() + args.spread
    # django-q2's scheduler may wake up to ~30 s after the last ONCE schedule is due.
    deadline = end + 35
    while time.time() < deadline and len(receiver.first) < len(due):
        time.sleep(0.25)
    plan_late = [
        receiver.first[k] - t
        for k, t in due.items()
        if k.startswith("/plan/") and k in receiver.first
    ]
    q2_late = [
        receiver.first[k] - t
        for k, t in due.items()
        if k.startswith("/q2/") and k in receiver.first
    ]
    lost = sum(1 for k in due if k.startswith("/plan/") and k not in receiver.first)
    print(f"spread: {args.lives} Lives over {args.spread:g} s; lateness (receipt - plan time)")
    print(lateness_line("watcher", plan_late))
    print(lateness_line("django-q2", q2_late))
    for name, label in (("celery", "Celery ETA"), ("apscheduler", "APScheduler")):
        if peers is not None and name in peers.names:
            late = [
                receiver.first[k] - t
                for k, t in due.items()
                if k.startswith("/peer/") and k.endswith(f"/{name}") and k in receiver.first
            ]
            print(lateness_line(label, late))
    for note in peers.notes if peers is not None else []:
        print(f"{'':<12} ({note})")
    if plan_late and q2_late:
        p50 = statistics.median(q2_late) / max(statistics.median(plan_late), 1e-3)
        p99 = percentile(q2_late, 0.99) / max(percentile(plan_late, 0.99), 1e-3)
        print(f"ratio django-q2 / watcher: p50 {p50:.0f}x, p99 {p99:.0f}x")
    print(f"undelivered plans: {lost}  (target p99 ≤ 1 s)", flush=True)

    # --- burst -----------------------------------------------------------------------------
    # Time to book them all first.
    moment = timezone.now() + dt.timedelta(seconds=args.lead - 2 + args.burst / 50)
    moment = moment.replace(microsecond=0)
    keys = [f"/plan/b{i}" for i in range(args.burst)]
    for i in range(args.burst):
        book_at(moment, f"b{i}")
    deadline = moment.timestamp() + 60
    while time.time() < deadline and not all(k in receiver.first for k in keys):
        time.sleep(0.1)
    got = [receiver.first[k] for k in keys if k in receiver.first]
    drained = (max(got) - moment.timestamp()) if got else float("nan")
    print(
        f"burst: {args.burst} Lives due at one second → last delivered after {drained:.2f} s "
        f"({len(got)}/{args.burst} delivered; target ≤ 10 s)",
        flush=True,
    )
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(20)
    procs.clear()

    # --- tick time vs history size -----------------------------------------------------------
    small = _tick_time(user, args.history_small)
    large = _tick_time(user, args.history_large)
    print(
        f"tick: {small * 1000:.2f} ms with {args.history_small:,} finished Lives, "
        f"{large * 1000:.2f} ms with {args.history_large:,} → ratio {large / small:.2f}x "
        "(target ≤ 2x)"
    )
    return 0


def _tick_time(user: Any, history: int) -> float:
    """Median time of one watcher tick's database work with `history` finished Lives."""
    from django.db import connection
    from django.utils import timezone

    from apps.core.models_utils import new_hex_id
    from apps.schedule.execution.claims import plan_claim, plan_invalidate_late, plan_leases_renew
    from apps.schedule.models import Life, LifeState, Plan, PlanState

    have = Life.objects.filter(state=LifeState.DEAD, resource_id="history").count()
    now = timezone.now()
    batch = 10_000
    while have < history:
        n = min(batch, history - have)
        lives = Life.objects.bulk_create(
            [
                Life(
                    life_uuid=new_hex_id(),
                    owner=user,
                    schedule_type="point",
                    resource_id="history",
                    birth_time=now - dt.timedelta(hours=20, seconds=i),
                    birth_action={"path": "/x", "method": "POST"},
                    state=LifeState.DEAD,
                    guard_start=now - dt.timedelta(hours=21),
                    guard_end=now - dt.timedelta(hours=19),
                    fingerprint="0" * 64,
                )
                for i in range(n)
            ]
        )
        Plan.objects.bulk_create(
            [
                Plan(
                    life=life,
                    kind="birth",
                    time=life.birth_time,
                    due_at=life.birth_time,
                    action=life.birth_action,
                    state=PlanState.DONE,
                    webhook_id=f"msg_{new_hex_id()}",
                    attempts_count=1,
                )
                for life in lives
            ]
        )
        have += n
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE schedule_life; ANALYZE schedule_plan;")
    samples = []
    for _ in range(20):
        started = time.perf_counter()
        moment = timezone.now()
        plan_invalidate_late(now=moment)
        plan_leases_renew(owner="bench", now=moment)
        plan_claim(owner="bench", now=moment)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


if __name__ == "__main__":
    sys.exit(main())
