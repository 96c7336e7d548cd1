"""Rescoring speed (SPEC §11.6): N counted, completed phase submissions rescored in a new
scoring version with a trivial scorer by a real qcluster of W workers (RESCORE_WORKERS = W
chains), against the isolated-run throughput of the same scorer on W threads (the
`bench/isolation.py` path: `apps.grading.isolation.run_program` in bubblewrap) in the same
run; then the grading latency of new phase submissions, one at a time, without a rescore and
during one.

    python bench/rescore.py [--n 100] [--workers 2] [--new 6]

A fresh SQLite database in a temporary folder (or DATABASE_URL's PostgreSQL server, in a
throwaway database), the ORM broker. Targets: rescore / isolated >= 0.8; latency during a
rescore <= 2 x without.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "benchmarks" / "digits"
SCORER = """import json
scores = {{"accuracy": 1.0, "errors": 0.0}}
json.dump({{"public": scores, "private": scores}}, open("/scores/scores.json", "w"))
# version {version}
"""


def _bundle(version: int) -> bytes:
    import yaml

    document: dict[str, Any] = yaml.safe_load((EXAMPLE / "challenge.yaml").read_text())
    phase = document["phases"][0]
    phase.pop("baselines", None)
    phase.pop("limits", None)
    phase["end"] = "2099-01-01T00:00:00Z"
    phase["resources"] = {"timeout": 20, "memory_mb": 256}
    document["phases"] = [phase]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(EXAMPLE.rglob("*")):
            name = path.relative_to(EXAMPLE).as_posix()
            if path.is_file() and not name.startswith(("baselines/", "scoring/", "challenge.yaml")):
                archive.write(path, name)
        archive.writestr("challenge.yaml", yaml.safe_dump(document))
        archive.writestr("scoring/score.py", SCORER.format(version=version))
    return buffer.getvalue()


def _environment(workdir: Path, workers: int) -> dict[str, str]:
    from bench.grading import _environment as grading_environment

    env = grading_environment(workdir, workers)
    env.update(RESCORE_WORKERS=str(workers), GRADING_BUNDLE_CACHE=str(workdir / "cache"))
    return env


def _isolated_runs(n: int, workers: int) -> float:
    """Seconds for N isolated runs of the trivial scorer's kind of program on W threads."""
    from apps.grading.grader import grading_isolation
    from bench.benchlib.runs import isolated_run
    from bench.isolation import LIMITS, PROGRAM, PYTHON

    bwrap = grading_isolation().bwrap

    def run(_: int) -> None:
        outcome = isolated_run(bwrap=bwrap, program=PROGRAM, limits=LIMITS, python=PYTHON)
        if outcome.exit_code != 0:
            raise RuntimeError(f"isolated run failed: {outcome}")

    started = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(run, range(n)))
    return time.monotonic() - started


def _apply(user: Any, version: int) -> None:
    import hashlib

    from apps.benchmarks.services.apply import challenge_apply

    data = _bundle(version)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bundle.zip"
        path.write_bytes(data)
        challenge_apply(user=user, bundle_path=path, sha256=hashlib.sha256(data).hexdigest())


def _entries(user: Any, phase: Any, count: int, *, status: str) -> list[Any]:
    """`count` phase submissions, each of a team of its own (as on a real board)."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    from apps.benchmarks.models import Entry, Team
    from apps.jobs.models import Job
    from apps.submissions.models import Submission, SubmissionFile, SubmissionKind

    created: list[Any] = []
    for _ in range(count):
        team = Team.objects.create(challenge=phase.challenge, name=f"team-{Team.objects.count()}")
        submission = Submission.objects.create(
            owner=user, status=status, kind=SubmissionKind.PREDICTIONS
        )
        content = b"id,label\n0,1\n"
        stored = default_storage.save(
            f"submissions/{submission.pk}/predictions.csv", ContentFile(content)
        )
        SubmissionFile.objects.create(
            submission=submission,
            filename="predictions.csv",
            size=len(content),
            sha256="0" * 64,
            storage_name=stored,
        )
        Entry.objects.create(submission=submission, phase=phase, team=team, user=user, counted=True)
        if status == "pending":
            created.append(Job.objects.create(owner=user, submission=submission))
        else:
            created.append(submission)
    return created


def _latencies(user: Any, phase: Any, count: int) -> list[float]:
    """Seconds from enqueue to `completed` of `count` new phase submissions, one at a time."""
    from django_q.tasks import async_task

    from apps.core.queue import GRADE_JOB
    from apps.submissions.models import Submission, SubmissionStatus
    from bench.benchlib.runs import wait_until

    seconds = []
    for job in _entries(user, phase, count, status="pending"):
        started = time.monotonic()
        async_task(GRADE_JOB, job.pk)
        completed = Submission.objects.filter(
            pk=job.submission_id, status=SubmissionStatus.COMPLETED
        )
        wait_until(completed.exists, 120)
        seconds.append(time.monotonic() - started)
    return seconds


def _run(workdir: Path, n: int, workers: int, new: int) -> int:
    from django.conf import settings
    from django.contrib.auth.models import Permission, User
    from django_q.models import OrmQ
    from django_q.tasks import async_task

    from apps.benchmarks.models import Phase, Rescore, RescoreItem
    from bench.benchlib.runs import cluster_start, cluster_stop, wait_until

    user = User.objects.create(username="bench")
    user.user_permissions.add(
        Permission.objects.get(codename="add_challenge", content_type__app_label="benchmarks")
    )
    _apply(user, 1)
    phase = Phase.objects.get(slug="dev")
    _entries(user, phase, n, status="completed")
    OrmQ.objects.all().delete()
    cluster = cluster_start()
    try:
        async_task("bench.grading.noop")  # warm-up: the cluster is up once this is acknowledged
        wait_until(lambda: OrmQ.objects.count() == 0, 60)
        quiet = _latencies(user, phase, new)

        started = time.monotonic()
        _apply(user, 2)  # its commit enqueues the rescore's W chains
        wait_until(lambda: Phase.objects.get(pk=phase.pk).scoring_version == 2, 1200)
        rescore_seconds = time.monotonic() - started

        busy: dict[int, tuple[list[float], int]] = {}
        for version, chains in ((3, 1), (4, workers)):
            # Another rescore with `chains` chains (settings of this process: the apply's
            # commit enqueues them), and new submissions graded one at a time meanwhile.
            settings.RESCORE_WORKERS = chains
            _apply(user, version)
            seconds = _latencies(user, phase, new)
            still_open = RescoreItem.objects.filter(
                rescore__version=version, status__in=["pending", "processing"]
            ).count()
            busy[chains] = (seconds, still_open)
            wait_until(Phase.objects.filter(pk=phase.pk, scoring_version=version).exists, 1200)
    finally:
        cluster_stop(cluster)

    isolated_seconds = _isolated_runs(n, workers)
    rescored = Rescore.objects.get(phase=phase, version=2).items.filter(status="done").count()
    rate, isolated_rate = rescored / rescore_seconds, n / isolated_seconds
    quiet_median = statistics.median(quiet)
    database = os.environ["DATABASE_URL"].split(":")[0]
    print(f"workers={workers} rescore chains={workers} n={n} database={database} broker=orm")
    print(f"rescore:        {rescore_seconds:6.2f} s  {rate:6.1f} submissions/s ({rescored} done)")
    print(f"isolated runs:  {isolated_seconds:6.2f} s  {isolated_rate:6.1f} runs/s (W threads)")
    print(f"ratio rescore / isolated runs: {rate / isolated_rate:6.1%}  (target >= 80 %)")
    print(
        f"new submission grading latency, median of {new}: without a rescore "
        f"{quiet_median * 1000:6.0f} ms"
    )
    for chains, (seconds, still_open) in busy.items():
        median = statistics.median(seconds)
        print(
            f"  during a rescore of {chains} chain(s): {median * 1000:6.0f} ms "
            f"({still_open} items still open after them): {median / quiet_median:4.2f}x"
            "  (target <= 2x)"
        )
    # The latency submissions of the second half are rescored too: at least n.
    return 0 if rescored >= n else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=int(os.environ.get("BENCH_RESCORE_N", 100)))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--new", type=int, default=6)
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args, _ = parser.parse_known_args()
    if not args.in_process:
        command = [
            sys.executable,
            __file__,
            "--in-process",
            f"--n={args.n}",
            f"--workers={args.workers}",
            f"--new={args.new}",
        ]
        return subprocess.run(command, cwd=ROOT, check=False).returncode
    with tempfile.TemporaryDirectory(prefix="yoyaku-bench-rescore-") as tmp:
        workdir = Path(tmp)
        workdir.chmod(0o711)  # the sandbox uid reaches the bundle cache through it
        sys.path.insert(0, str(ROOT))
        os.environ.update(_environment(workdir, args.workers))
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        try:
            return _run(workdir, args.n, args.workers, args.new)
        finally:
            from django.db import connections

            connections.close_all()
            url = os.environ["DATABASE_URL"]
            if url.startswith("postgres"):
                subprocess.run(
                    [
                        "dropdb",
                        "-h",
                        "127.0.0.1",
                        "-U",
                        "postgres",
                        "--if-exists",
                        url.rsplit("/", 1)[1],
                    ],
                    check=False,
                    capture_output=True,
                )


if __name__ == "__main__":
    status = main()
    if status:
        sys.exit(status)
