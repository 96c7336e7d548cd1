"""The idempotency protocol at the service level (`job_submit` with a key, and its parts)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone

from apps.jobs.exceptions import (
    IdempotencyKeyMismatch,
    IdempotencyKeyReused,
    IdempotencyRequestInProgress,
    InvalidIdempotencyKey,
    MissingFiles,
)
from apps.jobs.models import IdempotencyKey, Job
from apps.jobs.services import (
    idempotency_claim,
    idempotency_fingerprint,
    idempotency_key_resolve,
    idempotent_transaction,
    job_submit,
)
from apps.quotas.exceptions import QuotaExceeded
from apps.submissions.models import Submission
from tests.concurrency import run_concurrently
from tests.factories.quotas import make_policy
from tests.factories.submissions import SubmissionFileFactory, make_submission
from tests.factories.users import make_user


def _claim(user: User, submission: Submission, key: str) -> Any:
    fingerprint = idempotency_fingerprint(
        submission_id=submission.pk, config={}, reservation_id=None
    )
    return idempotency_claim(user=user, key=key, fingerprint=fingerprint, ttl_hours=24)


@pytest.mark.django_db(transaction=True)
class TestProtocol:
    def test_same_key_and_body_returns_the_same_job_without_a_second(self, user: User) -> None:
        submission = make_submission(owner=user)

        first = job_submit(user=user, submission_id=submission.pk, idempotency_key="k-1")
        again = job_submit(user=user, submission_id=submission.pk, idempotency_key="k-1")

        assert (first.created, again.created) == (True, False)
        assert again.job.pk == first.job.pk
        assert Job.objects.count() == 1

    def test_a_replay_reports_the_jobs_current_status(self, user: User) -> None:
        submission = make_submission(owner=user)
        first = job_submit(user=user, submission_id=submission.pk, idempotency_key="k-1")
        Job.objects.filter(pk=first.job.pk).update(status="running")

        again = job_submit(user=user, submission_id=submission.pk, idempotency_key="k-1")

        assert again.job.status == "running"

    def test_same_key_with_another_body_is_refused(self, user: User) -> None:
        submission = make_submission(owner=user)
        job_submit(user=user, submission_id=submission.pk, idempotency_key="k-1")

        with pytest.raises(IdempotencyKeyReused) as refused:
            job_submit(
                user=user,
                submission_id=submission.pk,
                config={"resource_class": "small"},
                idempotency_key="k-1",
            )

        assert refused.value.code == "idempotency_key_reused"
        assert Job.objects.count() == 1

    def test_a_key_held_by_a_live_request_answers_in_progress(self, user: User) -> None:
        submission = make_submission(owner=user)
        _claim(user, submission, "k-1")

        with pytest.raises(IdempotencyRequestInProgress) as refused:
            job_submit(user=user, submission_id=submission.pk, idempotency_key="k-1")

        assert refused.value.code == "idempotency_request_in_progress"
        assert not Job.objects.exists()

    def test_a_dead_claim_is_taken_over_after_the_lock_timeout(
        self, user: User, settings: Any
    ) -> None:
        settings.IDEMPOTENCY_LOCK_TIMEOUT = 60
        submission = make_submission(owner=user)
        start = timezone.now()
        with time_machine.travel(start, tick=False):
            _claim(user, submission, "k-1")
        with time_machine.travel(start + dt.timedelta(seconds=61), tick=False):
            result = job_submit(user=user, submission_id=submission.pk, idempotency_key="k-1")

        assert result.created
        assert IdempotencyKey.objects.get(key="k-1").job_id == result.job.pk

    def test_a_refused_request_releases_its_claim_so_a_retry_runs_again(self, user: User) -> None:
        submission = make_submission(owner=user, files=("main.py",))

        with pytest.raises(MissingFiles):
            job_submit(user=user, submission_id=submission.pk, idempotency_key="k-1")
        assert not IdempotencyKey.objects.exists()

        SubmissionFileFactory(submission=submission, filename="config.yaml")
        result = job_submit(user=user, submission_id=submission.pk, idempotency_key="k-1")
        assert result.created

    def test_a_replay_is_never_refused_by_the_quota(self, user: User) -> None:
        make_policy(user=user, max_concurrent_jobs=1)
        submission = make_submission(owner=user)
        first = job_submit(user=user, submission_id=submission.pk, idempotency_key="k-1")
        with pytest.raises(QuotaExceeded):
            job_submit(user=user, submission_id=make_submission(owner=user).pk)

        again = job_submit(user=user, submission_id=submission.pk, idempotency_key="k-1")

        assert again.job.pk == first.job.pk

    def test_an_expired_key_makes_a_new_job(self, user: User) -> None:
        first_submission = make_submission(owner=user)
        start = timezone.now()
        with time_machine.travel(start, tick=False):
            first = job_submit(
                user=user,
                submission_id=first_submission.pk,
                idempotency_key="k-1",
                idempotency_ttl_hours=1,
            )
        second_submission = make_submission(owner=user)
        with time_machine.travel(start + dt.timedelta(hours=1, seconds=1), tick=False):
            second = job_submit(
                user=user, submission_id=second_submission.pk, idempotency_key="k-1"
            )

        assert second.created
        assert second.job.pk != first.job.pk

    def test_keys_are_scoped_per_user(self, user: User, other_user: User) -> None:
        mine = job_submit(
            user=user, submission_id=make_submission(owner=user).pk, idempotency_key="k"
        )
        theirs = job_submit(
            user=other_user, submission_id=make_submission(owner=other_user).pk, idempotency_key="k"
        )

        assert theirs.created
        assert theirs.job.pk != mine.job.pk

    def test_racing_requests_with_one_key_make_exactly_one_job(self) -> None:
        user = make_user(username="racer")
        submission = make_submission(owner=user)

        def send(i: int) -> Any:
            return job_submit(user=user, submission_id=submission.pk, idempotency_key="race")

        results = run_concurrently(send, 12)

        assert Job.objects.count() == 1
        job = Job.objects.get()
        for outcome in results:
            if outcome.ok:
                assert outcome.value.job.pk == job.pk
            else:
                assert isinstance(outcome.error, IdempotencyRequestInProgress), outcome.error
        assert sum(o.ok and o.value.created for o in results) == 1


@pytest.mark.django_db(transaction=True)
class TestIdempotentTransaction:
    def test_the_header_key_is_the_key_a_body_key_replays(self, user: User) -> None:
        submission = make_submission(owner=user)

        first = job_submit(user=user, submission_id=submission.pk, idempotency_key_header="h-1")
        again = job_submit(user=user, submission_id=submission.pk, idempotency_key="h-1")

        assert (first.created, again.created) == (True, False)
        assert again.job.pk == first.job.pk
        assert IdempotencyKey.objects.get(key="h-1").job_id == first.job.pk

    def test_a_body_and_header_key_that_differ_are_refused_before_any_claim(
        self, user: User
    ) -> None:
        submission = make_submission(owner=user)

        with pytest.raises(IdempotencyKeyMismatch):
            job_submit(
                user=user,
                submission_id=submission.pk,
                idempotency_key="a",
                idempotency_key_header="b",
            )

        assert not IdempotencyKey.objects.exists()
        assert not Job.objects.exists()

    def test_a_failing_body_rolls_back_its_writes_and_releases_the_claim(self, user: User) -> None:
        submission = make_submission(owner=user)
        fingerprint = idempotency_fingerprint(
            submission_id=submission.pk, config={}, reservation_id=None
        )

        claimed: list[bool] = []

        def fail_after_a_write() -> None:
            with idempotent_transaction(user=user, key="k", fingerprint=fingerprint, ttl_hours=1):
                claimed.append(IdempotencyKey.objects.filter(key="k", job=None).exists())
                Submission.objects.filter(pk=submission.pk).update(question_id="written")
                raise LookupError("the body failed")

        with pytest.raises(LookupError):
            fail_after_a_write()

        assert claimed == [True]
        assert not IdempotencyKey.objects.exists()
        submission.refresh_from_db()
        assert submission.question_id != "written"

    def test_a_body_that_sets_no_job_binds_nothing_and_releases_the_claim(self, user: User) -> None:
        with (
            pytest.raises(RuntimeError, match="without its job"),
            idempotent_transaction(user=user, key="k", fingerprint="f", ttl_hours=1),
        ):
            pass

        assert not IdempotencyKey.objects.exists()


class TestResolve:
    def test_body_and_header_must_agree(self) -> None:
        with pytest.raises(IdempotencyKeyMismatch):
            idempotency_key_resolve(body_key="a", header_key="b")

    def test_either_source_gives_the_key(self) -> None:
        assert idempotency_key_resolve(body_key=None, header_key="gh-o/r-1") == "gh-o/r-1"
        assert idempotency_key_resolve(body_key="k", header_key="k") == "k"
        assert idempotency_key_resolve(body_key=None, header_key=None) is None

    @pytest.mark.parametrize("key", ["", "a b", "x" * 257, "é", "k1,k2", "tab\there"])
    def test_a_key_must_be_printable_ascii_without_whitespace(self, key: str) -> None:
        with pytest.raises(InvalidIdempotencyKey):
            idempotency_key_resolve(body_key=key, header_key=None)
