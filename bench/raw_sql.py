"""The five raw SQL statements of the submission path against their ORM equivalents.

Each statement (through `apps.core.sql.SqlStatement`) and the ORM query that does the same work
run N times on one connection; the report shows microseconds per call and the ratio ORM / SQL.
A statement stays in SQL only while that ratio is clearly above 1 (docs/benchmarks.md).

Environment: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/yoyaku_bench_raw_sql,
created and dropped by the run), BENCH_CALLS (per statement and round, default 1000).
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.benchlib.databases import postgres_recreate, psql_admin  # noqa: E402

DB_URL = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/yoyaku_bench_raw_sql"
)
CALLS = int(os.environ.get("BENCH_CALLS", "1000"))
ROUNDS = 3


def _psql_admin(sql: str) -> None:
    psql_admin(DB_URL, sql)


def _per_call_us(func: Callable[[], object]) -> float:
    for _ in range(50):
        func()
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(CALLS):
            func()
        best = min(best, (time.perf_counter() - start) / CALLS * 1e6)
    return best


def main() -> int:
    name = urlparse(DB_URL).path.lstrip("/")
    postgres_recreate(DB_URL)
    os.environ.update(DATABASE_URL=DB_URL, DEBUG="1", DJANGO_SETTINGS_MODULE="config.settings")
    sys.path.insert(0, str(ROOT))
    try:
        import django

        django.setup()
        from django.contrib.auth.models import User
        from django.core.management import call_command
        from django.db import connection, transaction
        from django.db.models import Count, Exists, OuterRef, Subquery, Sum
        from django.utils import timezone

        from apps.core.models_utils import new_hex_id
        from apps.jobs.models import ACTIVE_JOB_STATUSES, IdempotencyKey, Job
        from apps.jobs.selectors import idempotency_key_lookup, quota_usage
        from apps.jobs.services.idempotency import _BIND
        from apps.quotas.models import QuotaPolicy, Reservation
        from apps.quotas.selectors import month_start
        from apps.quotas.services import quota_policy_lock
        from apps.submissions.models import Submission, SubmissionFile
        from apps.submissions.services.transitions import submission_seal_ready

        call_command("migrate", verbosity=0)
        user = User.objects.create(username="bench")
        QuotaPolicy.objects.create(user=user)
        now = timezone.now()
        submission = Submission.objects.create(owner=user)
        job = Job.objects.create(owner=user, submission=submission)
        key = IdempotencyKey.objects.create(
            user=user, key="k", fingerprint="f", job=job, created_at=now, expires_at=now
        )
        adapt = connection.ops.adapt_datetimefield_value
        other_token = new_hex_id()

        def lock_sql() -> None:
            quota_policy_lock(user=user)

        def lock_orm() -> None:
            QuotaPolicy.objects.select_for_update(of=("self",)).filter(user=user).first()

        def count(queryset: object, value: object) -> Subquery:
            return Subquery(
                queryset.order_by().values("owner_id").annotate(n=value).values("n")  # type: ignore[attr-defined]
            )

        def usage_orm() -> None:
            own = Job.objects.filter(owner_id=OuterRef("pk"))
            User.objects.filter(pk=user.pk).annotate(
                active=count(own.filter(status__in=ACTIVE_JOB_STATUSES), Count("*")),
                day=count(own.filter(created_at__gt=now - dt.timedelta(hours=24)), Count("*")),
                cost=count(own.filter(created_at__gte=month_start(now)), Sum("cost")),
                held=Subquery(
                    Reservation.objects.filter(
                        user_id=OuterRef("pk"),
                        consumed_at__isnull=True,
                        released_at__isnull=True,
                        expires_at__gt=now,
                    )
                    .order_by()
                    .values("user_id")
                    .annotate(n=Count("*"))
                    .values("n")
                ),
            ).values_list("active", "day", "cost", "held").first()

        def lookup_orm() -> None:
            IdempotencyKey.objects.filter(user_id=user.pk, key="k").select_related("job").only(
                "fingerprint", "expires_at", "job__id", "job__status"
            ).first()

        def bind_sql() -> None:
            _BIND.rowcount([job.pk, adapt(now), key.pk, other_token])

        def bind_orm() -> None:
            IdempotencyKey.objects.filter(
                pk=key.pk, lock_token=other_token, job__isnull=True
            ).update(job_id=job.pk, lock_token="", locked_at=None, expires_at=now)

        def seal_orm() -> None:
            files = SubmissionFile.objects.filter(submission_id=OuterRef("pk"))
            Submission.objects.filter(pk=submission.pk, owner_id=user.pk, status="draft").filter(
                Exists(files.filter(filename=OuterRef("entrypoint"))),
                Exists(files.filter(filename=OuterRef("config_file"))),
            ).update(status="pending", updated_at=now)

        pairs: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
            ("policy lock (SELECT … FOR UPDATE)", lock_sql, lock_orm),
            (
                "usage count (4 subqueries)",
                lambda: quota_usage(user_id=user.pk, now=now),
                usage_orm,
            ),
            (
                "key lookup (join)",
                lambda: idempotency_key_lookup(user_id=user.pk, key="k", now=now),
                lookup_orm,
            ),
            ("key bind (compare-and-set)", bind_sql, bind_orm),
            (
                "draft seal (UPDATE, 2 EXISTS)",
                lambda: submission_seal_ready(submission_id=submission.pk, user_id=user.pk),
                seal_orm,
            ),
        ]
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"PostgreSQL, {CALLS} calls x {ROUNDS} rounds (best); load average {load}")
        # One transaction around everything: each call then costs its statement (compiling,
        # sending, running), not a BEGIN/COMMIT round trip that both ways would pay alike.
        with transaction.atomic():
            for label, sql, orm in pairs:
                sql_us, orm_us = _per_call_us(sql), _per_call_us(orm)
                print(
                    f"  {label:36s} SQL {sql_us:7.0f} us   ORM {orm_us:7.0f} us"
                    f"   ORM/SQL {orm_us / sql_us:4.2f}"
                )
        connection.close()
    finally:
        _psql_admin(f'DROP DATABASE IF EXISTS "{name}"')
    return 0


if __name__ == "__main__":
    sys.exit(main())
