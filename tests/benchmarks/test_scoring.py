"""Two-stage scoring of phase submissions (SPEC §11.2), graded by the worker's task in real
bubblewrap sandboxes: the example benchmark end to end in both phase kinds with its exact
scores, every scoring outcome, and baselines scored when the bundle is applied."""

from __future__ import annotations

import sys
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User

from apps.benchmarks.models import Entry, Score
from apps.benchmarks.tasks import baseline_score
from apps.core.queue import BASELINE_SCORE, GRADE_JOB, TaskEnqueue
from apps.grading.phase_results import NO_PREDICTIONS_REASON, SCORING_FAILED_REASON
from apps.grading.tasks import grade_job
from tests.benchmarks.scoring import (
    apply_bundle,
    graded,
    host_user,
    perfect_program,
    phase_draft,
    phase_of,
    phase_submission,
    predictions_csv,
    program,
    scorer_replaced,
    scores_of,
    zipped,
)
from tests.brokers import queued_tasks
from tests.grading.conftest import sandbox_settings  # noqa: F401 - the fixture

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sandbox_settings")]

EXACT_ONE_WRONG = {
    "public": {"accuracy": 14 / 15, "errors": 1.0},
    "private": {"accuracy": 1.0, "errors": 0.0},
}
PERFECT = {"public": {"accuracy": 1.0, "errors": 0.0}, "private": {"accuracy": 1.0, "errors": 0.0}}


@pytest.fixture
def challenge(db: None) -> Any:
    return apply_bundle(host_user())


def test_predictions_phase_scores_a_zip_of_predictions_exactly(challenge: Any, user: User) -> None:
    submission, job = phase_submission(
        user,
        phase_of(challenge, "dev"),
        {"preds.zip": zipped({"predictions.csv": predictions_csv(("s0",))})},
    )
    submission, job, entry = graded(submission, job)
    assert (submission.status, submission.score, job.status) == ("completed", None, "completed")
    assert scores_of(entry) == EXACT_ONE_WRONG
    assert entry.failure == ""
    assert Score.objects.filter(entry=entry, version=1).count() == 2


def test_code_phase_runs_the_program_then_scores_its_output_exactly(
    challenge: Any, user: User
) -> None:
    submission, job = phase_submission(user, phase_of(challenge, "code"), perfect_program())
    submission, job, entry = graded(submission, job)
    assert (submission.status, submission.score) == ("completed", None)
    assert scores_of(entry) == PERFECT
    assert "predicted 30 rows" in job.logs


def test_a_participants_own_metrics_json_is_ignored(challenge: Any, user: User) -> None:
    body = """
    import os
    for where in ("metrics.json", "/output/metrics.json", "/tmp/metrics.json"):
        try:
            open(where, "w").write('{"score": 1e300, "public": {"accuracy": 99}}')
        except OSError as exc:
            print("refused", where, type(exc).__name__)
    open("/output/predictions.csv", "w").write("id,label\\ns0,1\\n")
    """
    submission, job = phase_submission(
        user, phase_of(challenge, "code"), {**program(body), "metrics.json": b'{"score": 1e300}'}
    )
    submission, job, entry = graded(submission, job)
    assert (submission.status, submission.score) == ("completed", None)
    assert scores_of(entry)["public"]["accuracy"] < 0.2  # the scorer's judgement only
    assert "refused metrics.json" in job.logs  # the submission's own folder is read-only


def test_a_program_that_leaves_output_empty_fails_with_no_predictions(
    challenge: Any, user: User
) -> None:
    submission, job = phase_submission(
        user, phase_of(challenge, "code"), program("print('thinking')\n")
    )
    submission, job, entry = graded(submission, job)
    assert (submission.status, submission.status_reason, entry.failure) == (
        "failed",
        NO_PREDICTIONS_REASON,
        "no_predictions",
    )
    assert entry.scoring_logs == ""  # the scorer did not run
    assert not entry.scores.exists()


def test_a_crashing_program_fails_as_any_grading_without_a_scoring_failure(
    challenge: Any, user: User
) -> None:
    submission, job = phase_submission(
        user, phase_of(challenge, "code"), program("raise SystemExit(3)\n")
    )
    submission, job, entry = graded(submission, job)
    assert (submission.status, entry.failure) == ("failed", "")
    assert "exit code 3" in submission.status_reason


def test_invalid_predictions_show_the_hosts_message(challenge: Any, user: User) -> None:
    submission, job = phase_submission(
        user, phase_of(challenge, "dev"), {"predictions.csv": b"wrong,columns\n1,2\n"}
    )
    submission, job, entry = graded(submission, job)
    assert (submission.status, entry.failure) == ("failed", "invalid_predictions")
    assert "predictions.csv needs the columns id,label" in submission.status_reason
    assert not entry.scores.exists()


def _writes(document: str) -> str:
    return f"open('/scores/scores.json', 'w').write({document!r})"


GOOD_PRIVATE = '"private": {"accuracy": 1, "errors": 0}'
FAULTS = {
    "nan": _writes('{"public": {"accuracy": NaN, "errors": 1}, ' + GOOD_PRIVATE + "}"),
    "missing_metric": _writes('{"public": {"accuracy": 1}, ' + GOOD_PRIVATE + "}"),
    "missing_split": _writes('{"public": {"accuracy": 1, "errors": 0}}'),
    "boolean": _writes('{"public": {"accuracy": true, "errors": 0}, ' + GOOD_PRIVATE + "}"),
    "crash": 'raise RuntimeError("scorer bug")',
    "bad_json": _writes("{not json"),
    "no_file": 'print("forgot to write")',
    "timeout": "import time\ntime.sleep(60)",
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_scorer_fault_is_scoring_failed_with_the_reason_for_hosts_only(
    user: User, fault: str
) -> None:
    challenge = apply_bundle(host_user(), extra=scorer_replaced(FAULTS[fault] + "\n"))
    submission, job = phase_submission(
        user, phase_of(challenge, "dev"), {"predictions.csv": predictions_csv()}
    )
    submission, job, entry = graded(submission, job)
    assert (submission.status, entry.failure) == ("failed", "scoring_failed")
    assert submission.status_reason == SCORING_FAILED_REASON
    assert job.error == SCORING_FAILED_REASON
    assert entry.scoring_logs.startswith("[yoyaku] scoring failed: ")
    assert not entry.scores.exists()
    if fault == "crash":
        assert "scorer bug" in entry.scoring_logs
        assert "scorer bug" not in job.logs + submission.status_reason


def test_baselines_are_scored_after_the_bundle_is_applied_once(
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        challenge = apply_bundle(host_user())
    tasks = [c for c in callbacks if isinstance(c, TaskEnqueue) and c.task == BASELINE_SCORE]
    assert len(tasks) == 1
    (baseline_id,) = tasks[0].args
    assert baseline_score(baseline_id) == "scored"
    assert baseline_score(baseline_id) == "already_scored"  # a second delivery changes nothing
    scores = {s.split: s.values for s in Score.objects.filter(baseline_id=baseline_id)}
    assert scores == {
        "public": {"accuracy": 5 / 15, "errors": 10.0},
        "private": {"accuracy": 1 / 15, "errors": 14.0},
    }
    assert phase_of(challenge, "dev").baselines.get().pk == baseline_id


def test_a_worker_that_may_not_grade_fails_a_phase_submission_as_the_platforms_fault(
    challenge: Any, user: User, settings: Any
) -> None:
    settings.GRADING_PYTHON = sys.executable  # the platform's own interpreter: refused
    submission, job = phase_submission(
        user, phase_of(challenge, "dev"), {"predictions.csv": predictions_csv()}
    )
    submission, job, entry = graded(submission, job)
    assert (submission.status, entry.failure) == ("failed", "scoring_failed")
    assert submission.status_reason == SCORING_FAILED_REASON
    assert "GRADING_PYTHON" in entry.scoring_logs


def test_a_code_submission_enqueued_through_the_jobs_api_is_scored(
    challenge: Any, user: User, client_for: Any, django_capture_on_commit_callbacks: Any
) -> None:
    phase = phase_of(challenge, "code")
    submission = phase_draft(user, phase, perfect_program())
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client_for(user).post(
            "/api/jobs/", {"submission_id": submission.pk}, format="json"
        )
    assert response.status_code == HTTPStatus.CREATED, response.content
    [args] = [args for task, *args in queued_tasks(callbacks) if task == GRADE_JOB]
    grade_job(*args)  # what the worker does with the delivered task
    submission.refresh_from_db()
    assert submission.status == "completed"
    assert scores_of(Entry.objects.get(pk=submission.pk)) == PERFECT
