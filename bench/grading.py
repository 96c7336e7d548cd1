"""Grading throughput: N trivial submissions graded end-to-end by a real qcluster with W workers,
against N no-op django-q2 tasks on the same cluster settings in the same run; then duplicate
and late deliveries of every job, counting how often a program actually ran.

    python bench/grading.py [--n 100] [--workers 2]

Uses a fresh SQLite database in a temporary folder (or DATABASE_URL's PostgreSQL server, in a
throwaway database) and the ORM broker, so it never touches your data.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.benchlib.databases import postgres_recreate, sqlite_url  # noqa: E402
from bench.benchlib.runs import cluster_start, cluster_stop, wait_until  # noqa: E402

# The sandbox lets nothing out but the logs and metrics.json: program runs are counted as
# grading attempts (one per lease; a skipped duplicate delivery takes none).
PROGRAM = """
import json
json.dump({"score": 1.0}, open("metrics.json", "w"))
"""


def noop() -> None:
    """The baseline task: nothing at all."""


def _environment(workdir: Path, workers: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    base = os.environ.get("DATABASE_URL", "")
    if base.startswith("postgres"):
        # Named after the given database (its owner's prefix on a shared server).
        name = f"{base.rsplit('/', 1)[1] or 'yoyaku'}_bench_{os.getpid()}"
        url = base.rsplit("/", 1)[0] + "/" + name
        postgres_recreate(url)
    else:
        url = sqlite_url(workdir / "bench.sqlite3")
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=url,
        DEBUG="false",
        SECRET_KEY="bench-only-secret",  # noqa: S106 - a throwaway database
        SCHEDULE_WEBHOOK_SECRET="whsec_YmVuY2gtb25seS13ZWJob29rLXNlY3JldA==",  # noqa: S106
        MEDIA_ROOT=str(workdir / "media"),
        Q_WORKERS=str(workers),
        Q_POLL="0.05",
        GRADING_TIMEOUT="30",
        LOG_LEVEL="WARNING",
    )
    return env


def _bare_programs(workdir: Path, n: int, workers: int) -> float:
    """The floor for any grader that runs a Python program: N plain runs on W threads."""
    from concurrent.futures import ThreadPoolExecutor

    folder = workdir / "bare"
    folder.mkdir()
    (folder / "main.py").write_text(
        "import json\njson.dump({'score': 1}, open('metrics.json', 'w'))\n"
    )

    def run(_: int) -> None:
        subprocess.run([sys.executable, "main.py", "config.yaml"], cwd=folder, check=True)

    started = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(run, range(n)))
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=int(os.environ.get("BENCH_GRADING_N", 100)))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args, _ = parser.parse_known_args()
    n, workers = args.n, args.workers
    if not args.in_process:
        # Its own interpreter: Django is set up with this benchmark's settings only, whatever
        # `bench/run_all.py` ran before in the same process.
        command = [sys.executable, __file__, "--in-process", f"--n={n}", f"--workers={workers}"]
        return subprocess.run(command, cwd=ROOT, check=False).returncode

    with tempfile.TemporaryDirectory(prefix="yoyaku-bench-") as tmp:
        workdir = Path(tmp)
        os.environ.update(_environment(workdir, workers))
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        try:
            return _run(workdir, n, workers)
        finally:
            from django.db import connections

            connections.close_all()
            url = os.environ["DATABASE_URL"]
            if url.startswith("postgres"):
                name = url.rsplit("/", 1)[1]
                subprocess.run(
                    ["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", name],
                    check=False,
                    capture_output=True,
                )


def _run(workdir: Path, n: int, workers: int) -> int:
    from django.contrib.auth.models import User
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage
    from django_q.models import OrmQ
    from django_q.tasks import async_task

    from apps.core.queue import GRADE_JOB
    from apps.grading.models import GradingAttempt
    from apps.jobs.models import Job
    from apps.submissions.models import Submission, SubmissionFile, SubmissionStatus

    owner = User.objects.create(username="bench")

    def make(count: int) -> list[Job]:
        jobs = []
        for _ in range(count):
            submission = Submission.objects.create(owner=owner, status=SubmissionStatus.PENDING)
            for name, content in (
                ("main.py", PROGRAM.encode()),
                ("config.yaml", b"a: 1\n"),
                ("id.txt", submission.pk.encode()),
            ):
                stored = default_storage.save(
                    f"submissions/{submission.pk}/{name}", ContentFile(content)
                )
                SubmissionFile.objects.create(
                    submission=submission,
                    filename=name,
                    size=len(content),
                    sha256="0" * 64,
                    storage_name=stored,
                )
            jobs.append(Job.objects.create(owner=owner, submission=submission))
        return jobs

    def finished(ids: list[str]) -> Callable[[], bool]:
        return lambda: (
            not Submission.objects.filter(
                pk__in=ids, status__in=[SubmissionStatus.PENDING, SubmissionStatus.PROCESSING]
            ).exists()
        )

    timed_jobs = make(n)
    duplicate_jobs = make(n // 2)
    cluster = cluster_start(
        stderr=(workdir / "cluster.log").open("wb")
        if os.environ.get("BENCH_DEBUG")
        else subprocess.DEVNULL
    )
    try:
        async_task("bench.grading.noop")  # warm-up: the cluster is up once this is acknowledged
        wait_until(lambda: OrmQ.objects.count() == 0, 60)

        started = time.monotonic()
        for _ in range(n):
            async_task("bench.grading.noop")
        wait_until(lambda: OrmQ.objects.count() == 0, 300)
        noop_seconds = time.monotonic() - started

        started = time.monotonic()
        for job in timed_jobs:
            async_task(GRADE_JOB, job.pk)
        wait_until(finished([j.submission_id for j in timed_jobs]), 600)
        grading_seconds = time.monotonic() - started

        # Forced redelivery: every job delivered twice at once, then once more after the end.
        for job in duplicate_jobs:
            async_task(GRADE_JOB, job.pk)
            async_task(GRADE_JOB, job.pk)
        wait_until(finished([j.submission_id for j in duplicate_jobs]), 600)
        for job in [*timed_jobs, *duplicate_jobs]:
            async_task(GRADE_JOB, job.pk)
        wait_until(lambda: OrmQ.objects.count() == 0, 600)
    finally:
        cluster_stop(cluster)
        if os.environ.get("BENCH_DEBUG"):
            print((workdir / "cluster.log").read_text()[-3000:])

    bare_seconds = _bare_programs(workdir, n, workers)
    total = n + n // 2
    runs = GradingAttempt.objects.count()
    completed = Submission.objects.filter(status=SubmissionStatus.COMPLETED).count()
    duplicates = runs - GradingAttempt.objects.values("submission").distinct().count()
    noop_rate = n / noop_seconds
    grading_rate = n / grading_seconds
    print(f"workers={workers} n={n} database={os.environ['DATABASE_URL'].split(':')[0]} broker=orm")
    print(f"no-op django-q2 tasks: {noop_seconds:6.2f} s  {noop_rate:7.1f} tasks/s")
    print(f"end-to-end gradings:   {grading_seconds:6.2f} s  {grading_rate:7.1f} gradings/s")
    bare_rate = n / bare_seconds
    print(
        f"bare program runs:     {bare_seconds:6.2f} s  {bare_rate:7.1f} runs/s  (W threads, no DB)"
    )
    print(f"ratio grading / no-op: {grading_rate / noop_rate:6.1%}  (target >= 50 %)")
    floor = 1 / (1 / noop_rate + 1 / bare_rate)
    print(
        f"ratio grading / (no-op task + bare program run): {grading_rate / floor:6.1%}  "
        "(what the leases, sandbox and result writes cost on top of running the program)"
    )
    print(
        f"redelivery: {n // 2} jobs x2 at once + {total} late deliveries -> "
        f"{runs} program runs (attempts) for {total} submissions, {completed} completed, "
        f"duplicate gradings = {duplicates}"
    )
    return 0 if duplicates == 0 and completed == total else 1


if __name__ == "__main__":
    status = main()
    if status:
        sys.exit(status)
