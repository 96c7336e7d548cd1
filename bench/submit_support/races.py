"""bench/submit.py's users and their drafts, made in the database, and the races on one user's
quota and on one idempotency key, read back from the database."""

from __future__ import annotations

from typing import Any

from bench.submit_support.harness import RACERS, ROUNDS, run_load


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
