"""The plain job admission runs, on PostgreSQL, as a function created by a migration: the
function in the database, the migration's text and `apps.jobs.admission_function` must agree,
and the function must decide with the limits `quota_limits` gives, so that its answers and
refusals are the general path's."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import override_settings

from apps.jobs.admission_function import (
    ADMIT_FUNCTION,
    admit_function_arguments,
    admit_function_body,
    admit_function_sql,
)
from apps.jobs.models import Job
from apps.quotas.models import QuotaPolicy
from tests.factories.submissions import make_submission
from tests.plpgsql import stored_function

pytestmark = pytest.mark.django_db

Submit = Callable[..., Any]
postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="a PostgreSQL function"
)


@postgresql_only  # the argument types are PostgreSQL's column types
def test_the_migration_creates_the_function_the_module_defines() -> None:
    migration = importlib.import_module("apps.jobs.migrations.0004_admit_plain_function")
    assert admit_function_sql() == migration.CREATE


@postgresql_only
def test_the_function_in_the_database_is_the_modules() -> None:
    body, arguments, _returns, volatility = stored_function(ADMIT_FUNCTION)
    assert body == admit_function_body()
    assert arguments == admit_function_arguments()
    # VOLATILE: each statement takes its own snapshot (the count sees what the lock waited for).
    assert volatility == "v"


def _answers(submit: Submit, user: User, count: int, run: str) -> list[tuple[int, dict[str, Any]]]:
    """`count` submissions of new drafts (each its own question and key), their answers
    without the job's id."""
    answers = []
    for n in range(count):
        submission = make_submission(owner=user, question_id=f"{run}-{n}")
        response = submit({"submission_id": submission.pk, "idempotency_key": f"{run}-{n}"})
        body = response.json()
        body.pop("job_id", None)
        body.pop("request_id", None)
        answers.append((response.status_code, body))
    return answers


# (policy fields, settings): every way the limits are made (a policy's own limit, the
# settings' default, a boost clamped by QUOTA_MAX_BOOST, a base of 0 that no boost lifts, a
# cost limit reached exactly, a negative boost).
CASES = [
    ({"max_concurrent_jobs": 2}, {}),
    ({}, {"QUOTA_MAX_CONCURRENT_JOBS": 3}),
    ({"max_concurrent_jobs": 1, "concurrent_boost": 5}, {"QUOTA_MAX_BOOST": 2}),
    ({"max_concurrent_jobs": 0, "concurrent_boost": 3}, {}),
    ({"concurrent_boost": -4}, {"QUOTA_MAX_CONCURRENT_JOBS": 2}),
    ({"max_jobs_per_day": 2}, {}),
    ({}, {"QUOTA_MAX_JOBS_PER_DAY": 3}),
    ({"monthly_cost_limit": 2.0}, {"RESOURCE_CLASS_COSTS": {"medium": 1.0}}),
    ({}, {"QUOTA_MONTHLY_COST_LIMIT": 1.5, "RESOURCE_CLASS_COSTS": {"medium": 0.5}}),
]


@postgresql_only
@pytest.mark.parametrize(("policy", "overrides"), CASES)
def test_the_function_answers_as_the_general_path(
    submit: Submit,
    user: User,
    monkeypatch: pytest.MonkeyPatch,
    policy: dict[str, Any],
    overrides: dict[str, Any],
) -> None:
    """The same five submissions, once through the function and once through the general
    path (the function answering "no policy row"): the same status codes and bodies, in the
    same order, the same jobs."""
    QuotaPolicy.objects.create(user=user, **policy)
    with override_settings(**overrides):
        fast = _answers(submit, user, 5, "fast")
        fast_jobs = Job.objects.filter(owner=user).count()
        Job.objects.all().delete()
        monkeypatch.setattr("apps.jobs.admission.admit_plain", lambda *a, **k: None)
        general = _answers(submit, user, 5, "general")
    assert fast == general
    assert Job.objects.filter(owner=user).count() == fast_jobs


@postgresql_only
def test_a_user_without_a_policy_row_takes_the_general_path(submit: Submit, user: User) -> None:
    QuotaPolicy.objects.filter(user=user).delete()
    answers = _answers(submit, user, 2, "first")
    assert [status for status, _ in answers] == [HTTPStatus.CREATED, HTTPStatus.CREATED]
    assert QuotaPolicy.objects.filter(user=user).count() == 1
