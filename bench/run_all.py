"""Run every benchmark script in bench/, each in its own interpreter, one after another.

Output is shown and also written to bench/results/<script>.txt. Plain arguments name the
scripts to run (`submit`, `upload`, ...); arguments starting with `-` are passed to each script
that runs (so name one script when passing its own options). `chaos.py` runs only when named:
it is `make chaos`, and it restarts the PostgreSQL and Redis it is pointed at.

`--quick` (`make bench QUICK=1`, and CI): every script with tiny sizes (bench/benchlib/quick.py),
two at a time, on throw-away databases copied from one migrated template of each kind (SQLite,
and PostgreSQL at BENCH_QUICK_POSTGRES, default 127.0.0.1:5432); each must exit 0 and print its
table (a line the table always has). Only that it still runs is checked, not its figures: a
schema change that breaks a script fails the quick run. Peers that need requirements/bench.txt
are left out.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.benchlib.databases import (  # noqa: E402
    PG_TEMPLATE,
    SQLITE_TEMPLATE,
    postgres_drop,
    postgres_recreate,
)
from bench.benchlib.quick import QUICK_FLAG  # noqa: E402

# Scripts `make bench` runs only when named (`make bench BENCH=chaos`).
NAMED_ONLY = {"chaos"}
# The quick mode: per script, its arguments, its environment and a line its table always has.
QUICK: dict[str, tuple[list[str], dict[str, str], str]] = {
    "bundle_memory": ([], {"BENCH_RUNS": "1", "BENCH_BUNDLE_MB": "1"}, "peak RSS growth"),
    "client_busy": (
        [],
        {"BENCH_FILES": "3", "BENCH_FILE_MB": "1", "BENCH_SHARE_MB": "1.5", "BENCH_ROUNDS": "1"},
        "finished",
    ),
    "client_startup": (["--runs", "1"], {}, "submit-help"),
    "client_upload": (
        [],
        {"BENCH_FILES": "2", "BENCH_FILE_MB": "0.0625", "BENCH_ROUNDS": "1"},
        "yoyaku / curl throughput",
    ),
    "grading": (["--n", "3", "--workers", "1"], {}, "ratio grading / no-op"),
    "isolation": (["--n", "10"], {}, "isolated / bare bwrap"),
    "leaderboard": (
        [],
        {"BENCH_SUBMISSIONS": "500", "BENCH_TEAMS": "250", "BENCH_REQUESTS": "4"},
        "ratio (slower",
    ),
    "phase_submissions": ([], {"BENCH_N": "4", "BENCH_THREADS": "2"}, "enqueue"),
    "raw_sql": ([], {"BENCH_CALLS": "20"}, "ORM/SQL"),
    "resumable_upload": (
        [],
        {"BENCH_RESUMABLE_MB": "2", "BENCH_APPEND_MB": "0.5"},
        "throughput ratio (resumable / single)",
    ),
    "rescore": (["--n", "3", "--workers", "1", "--new", "1"], {}, "ratio rescore / isolated"),
    "schedule": (
        [
            *("--lives", "5", "--spread", "1", "--q2-schedules", "0", "--peer-jobs", "0"),
            *("--burst", "5"),
            *("--history-small", "10", "--history-large", "20", "--lead", "6"),
        ],
        {},
        "burst:",
    ),
    "schedule_backlog": (
        [
            *("--backlog", "2", "--plans", "3", "--spread", "1", "--runs", "1", "--lead", "4"),
            *("--slow-kind", "sleep"),  # the backlog's tasks sleep: no CPU burnt for nothing
        ],
        {"BOOKING_PLAN_WATCH_INTERVAL": "1000"},
        "lateness p99",
    ),
    "submit": (
        [],
        {
            "BENCH_REQUESTS": "2",
            "BENCH_WORKERS": "1",
            "BENCH_ROUNDS": "1",
            "BENCH_SLICES": "1",
            "BENCH_PHASE_REQUESTS": "1",
            "BENCH_PHASE_ROUNDS": "3",
        },
        "ratios:",
    ),
    "two_stage": (["--n", "2"], {}, "two-stage grading"),
    "upload": ([], {"BENCH_BIG_MB": "0.25"}, "sequential"),
    "web_server": (
        [],
        {"BENCH_ROUNDS": "1", "BENCH_SLICES": "1", "BENCH_REQUESTS": "2", "BENCH_WORKERS": "1"},
        "shipped / sync",
    ),
}
QUICK_JOBS = 2
SETTINGS = "config.settings"


def main() -> int:
    scripts = sorted(p for p in HERE.glob("*.py") if p.name not in {"run_all.py", "__init__.py"})
    quick = "--quick" in sys.argv[1:]
    only = {arg for arg in sys.argv[1:] if not arg.startswith("-")}
    flags = [arg for arg in sys.argv[1:] if arg.startswith("-") and arg != "--quick"]
    chosen = [
        script
        for script in scripts
        if (script.stem in only) or (not only and script.stem not in NAMED_ONLY)
    ]
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    if quick:
        return _quick([s for s in chosen if s.stem in QUICK], flags)
    failed: list[str] = []
    for script in chosen:
        print(f"== {script.name}", flush=True)
        with (results / f"{script.stem}.txt").open("w") as log:
            process = subprocess.Popen(
                [sys.executable, str(script), *flags],
                cwd=HERE.parent,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            assert process.stdout is not None
            for line in process.stdout:
                sys.stdout.write(line)
                log.write(line)
            if process.wait() != 0:
                failed.append(script.name)
    if failed:
        print("failed: " + ", ".join(failed))
        return 1
    return 0


def _quick(scripts: list[Path], flags: list[str]) -> int:
    started = time.monotonic()
    server = os.environ.get("BENCH_QUICK_POSTGRES", "postgres://postgres@127.0.0.1:5432")
    tag = f"{os.getpid()}"
    template = f"{server}/yoyaku_bench_quick_template_{tag}"
    work = Path(tempfile.mkdtemp(prefix="yoyaku-bench-quick-"))
    sqlite = work / "template.sqlite3"
    # No database of the caller's: every script makes its own throw-away one.
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({QUICK_FLAG: "1", PG_TEMPLATE: template.rsplit("/", 1)[1], "LOG_LEVEL": "WARNING"})
    env[SQLITE_TEMPLATE] = str(sqlite)
    made: list[str] = []
    migrating = 0.0
    try:
        postgres_recreate(template)  # empty: migrated below, then copied per script
        made.append(template)
        _migrate_templates(env, {"postgres": template, "sqlite": f"sqlite:///{sqlite}"})
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        migrating = children.ru_utime + children.ru_stime
        print(
            f"quick: templates migrated in {time.monotonic() - started:.1f} s, "
            f"CPU {migrating:.1f} s",
            flush=True,
        )
        lock = threading.Lock()

        def one(script: Path) -> tuple[str, bool, float]:
            args, extra, marker = QUICK[script.stem]
            url = f"{server}/yoyaku_bench_quick_{script.stem}_{tag}"
            made.append(url)
            run_env = {**env, **extra, "BENCH_DATABASE_URL": url}
            begun = time.monotonic()
            process = subprocess.Popen(
                [sys.executable, str(script), *args, *flags],
                cwd=HERE.parent,
                env=run_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            assert process.stdout is not None
            output = process.stdout.read().decode(errors="replace")
            # Its own CPU time and its children's (servers, workers), apart from the other job's.
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = code = os.waitstatus_to_exitcode(status)
            seconds, cpu = time.monotonic() - begun, usage.ru_utime + usage.ru_stime
            ok = code == 0 and marker in output
            (HERE / "results" / f"{script.stem}.quick.txt").write_text(output)
            with lock:
                verdict = "ok" if ok else f"FAILED (exit {code}, table line {marker!r})"
                print(
                    f"== {script.name}: {verdict} in {seconds:.1f} s, {cpu:.1f} s CPU", flush=True
                )
                if not ok:
                    sys.stdout.write(output[-6000:])
                else:
                    sys.stdout.write("".join(f"   {line}\n" for line in _table(output)))
                sys.stdout.flush()
            return script.name, ok, cpu

        with ThreadPoolExecutor(QUICK_JOBS) as pool:
            outcomes = list(pool.map(one, scripts))
    finally:
        for url in made:
            postgres_drop(url)
        shutil.rmtree(work, ignore_errors=True)
    failed = [name for name, ok, _ in outcomes if not ok]
    total = time.monotonic() - started
    cpu = migrating + sum(cpu for _, _, cpu in outcomes)
    print(
        f"quick: {len(outcomes)} scripts in {total:.1f} s, their CPU {cpu:.1f} s "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
    )
    if failed:
        print("failed: " + ", ".join(failed))
        return 1
    return 0


def _migrate_templates(env: dict[str, str], urls: dict[str, str]) -> None:
    """Migrate both templates at once (each in its own interpreter)."""
    processes = [
        subprocess.Popen(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=HERE.parent,
            env={
                **env,
                "DATABASE_URL": url,
                "DEBUG": "1",
                "DJANGO_SETTINGS_MODULE": "config.settings",
            },
        )
        for url in urls.values()
    ]
    if any(process.wait() != 0 for process in processes):
        raise RuntimeError("migrating the quick mode's templates failed")


def _table(output: str) -> list[str]:
    """The last lines a script printed (its table), at most 12."""
    return [line for line in output.splitlines() if line.strip()][-12:]


if __name__ == "__main__":
    sys.exit(main())
