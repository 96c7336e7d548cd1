"""Phase submissions against question submissions, in one process through the real API
(Django's test client, token authentication, real transactions).

Measures per request, p50 / p99 in milliseconds, over `BENCH_N` requests each (default 200):
- creating a question submission (two files) and a predictions submission to a phase (one
  file; the resolver's checks, the entry and, the first time, the team of one);
- enqueueing each (`POST /api/jobs/`; the phase's check and the entry's `counted`);
and, with `BENCH_THREADS` (default 8) threads per user racing their first submissions for 20
users, the teams made (must equal the users).

SQLite in a temporary folder by default; `DATABASE_URL` selects PostgreSQL (a database of
its own: the run migrates it and EMPTIES it first).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
N = int(os.environ.get("BENCH_N", "200"))
THREADS = int(os.environ.get("BENCH_THREADS", "8"))
RACE_USERS = 20


def _setup() -> None:
    folder = tempfile.mkdtemp(prefix="yoyaku-bench-phase-")
    sys.path.insert(0, str(ROOT))
    from bench.benchlib.databases import sqlite_url

    os.environ.setdefault("DATABASE_URL", sqlite_url(Path(folder) / "db.sqlite3"))
    os.environ.update(DEBUG="1", DJANGO_SETTINGS_MODULE="config.settings", MEDIA_ROOT=folder)
    os.environ["ALLOWED_HOSTS"] = "testserver"
    os.environ.setdefault("QUOTA_MAX_STORAGE_BYTES", str(10**12))
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    from django.conf import settings

    settings.MEDIA_ROOT = folder


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered) * 1000:6.1f} ms  p99 {p99 * 1000:6.1f} ms"


def _enqueue_time(api: Any, submission_id: str) -> float:
    start = time.perf_counter()
    response = api.post("/api/jobs/", {"submission_id": submission_id}, format="json")
    elapsed = time.perf_counter() - start
    assert response.status_code == 201, response.content[:300]
    return elapsed


def _race(apis: list[Any], attempt: Callable[[Any, int], int]) -> list[int]:
    """Each client's `attempt(client, index)` in its own thread, released together."""
    from django.db import connections

    barrier = threading.Barrier(len(apis))
    codes: list[int] = []

    def run(api: Any, index: int) -> None:
        try:
            barrier.wait()
            codes.append(attempt(api, index))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(a, i)) for i, a in enumerate(apis)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return codes


def main() -> int:
    _setup()
    from django.contrib.auth.models import Permission, User
    from django.core.files.uploadedfile import SimpleUploadedFile
    from rest_framework.test import APIClient

    from apps.benchmarks.models import Team
    from apps.benchmarks.services.participants import challenge_participate
    from apps.core.services import token_create

    def client(user: User, scopes: list[str]) -> APIClient:
        api = APIClient()
        token = token_create(user=user, name=f"bench-{time.monotonic_ns()}", scopes=scopes)
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {token.token}")
        return api

    host = User.objects.create(username="bench-host")
    host.user_permissions.add(Permission.objects.get(codename="add_challenge"))
    host = User.objects.get(pk=host.pk)
    sys.path.insert(0, str(ROOT))
    from tests.benchmarks.bundles import bundle

    def no_limits(manifest: dict[str, Any]) -> None:
        # The example's team limits (5 a day, 2 at once) would refuse the N enqueues measured.
        for phase in manifest["phases"]:
            phase.pop("limits", None)

    upload = SimpleUploadedFile("bundle.zip", bundle(no_limits), content_type="application/zip")
    applied = client(host, ["host", "read"]).post("/api/challenges/", {"bundle": upload})
    assert applied.status_code == 201, applied.content[:300]

    def create(api: APIClient, phase: bool, index: int) -> Any:
        if phase:
            files = [SimpleUploadedFile(f"p{index}.csv", b"id,label\n0,3\n")]
            data: dict[str, Any] = {"files": files, "challenge": "digits", "phase": "dev"}
        else:
            files = [
                SimpleUploadedFile("main.py", b"print(1)\n"),
                SimpleUploadedFile("config.yaml", b"a: 1\n"),
            ]
            data = {"files": files, "question_id": f"q{index}"}
        return api.post("/api/submissions/", data, format="multipart")

    print(f"{N} requests each ({os.environ['DATABASE_URL'].split(':')[0]})")
    for phase in (False, True):
        user = User.objects.create(username=f"bench-{'phase' if phase else 'question'}")
        challenge_participate(user=user, slug="digits")
        api = client(user, ["submit", "read"])
        created: list[float] = []
        ids: list[str] = []
        for index in range(N):
            start = time.perf_counter()
            response = create(api, phase, index)
            created.append(time.perf_counter() - start)
            assert response.status_code == 201, response.content[:300]
            ids.append(response.json()["submission_id"])
        from apps.quotas.models import QuotaPolicy

        QuotaPolicy.objects.update_or_create(
            user=user, defaults={"max_concurrent_jobs": N + 1, "max_jobs_per_day": N + 1}
        )
        enqueued = [_enqueue_time(api, submission_id) for submission_id in ids]
        label = "predictions to a phase" if phase else "question (program)"
        print(f"  create  {label:24s} {_ms(created)}")
        print(f"  enqueue {label:24s} {_ms(enqueued)}")

    teams_before = Team.objects.count()
    for number in range(RACE_USERS):
        user = User.objects.create(username=f"racer-{number}")
        challenge_participate(user=user, slug="digits")
        apis = [client(user, ["submit"]) for _ in range(THREADS)]
        codes = _race(apis, lambda api, index: int(create(api, True, index).status_code))
        assert codes == [201] * THREADS, codes
    made = Team.objects.count() - teams_before
    print(f"  {RACE_USERS} users x {THREADS} racing first submissions: {made} teams made")
    return 0 if made == RACE_USERS else 1


if __name__ == "__main__":
    sys.exit(main())
