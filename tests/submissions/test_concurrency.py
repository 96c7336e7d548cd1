"""Races through the real API (one test client per thread, real transactions): a name lands
once, identical retries all succeed, and the file limit holds. SQLite and PostgreSQL."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.submissions.models import Submission, SubmissionFile, SubmissionStatus
from apps.submissions.selectors import submission_get
from apps.submissions.services.transitions import submission_transition
from tests.concurrency import run_concurrently
from tests.submissions.conftest import add_file, create_submission

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 8


def _outcomes(results: list[Any]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for outcome in results:
        assert outcome.ok, outcome.error
        response = outcome.value
        if response.status_code in (HTTPStatus.OK, HTTPStatus.CREATED):
            counts[str(response.status_code)] += 1
        else:
            counts[response.json()["code"]] += 1
    return counts


def _clients(user: User, client_for: Callable[[User], APIClient]) -> list[APIClient]:
    return [client_for(user) for _ in range(THREADS)]


def test_one_new_name_with_different_contents_lands_once(
    user: User, client_for: Callable[[User], APIClient], stored_names: Callable[[], list[str]]
) -> None:
    clients = _clients(user, client_for)
    submission_id = create_submission(clients[0]).json()["submission_id"]

    results = run_concurrently(
        lambda i: add_file(clients[i], submission_id, "model.py", f"version {i}".encode()), THREADS
    )

    assert _outcomes(results) == {"201": 1, "duplicate_filename": THREADS - 1}
    [row] = SubmissionFile.objects.filter(submission_id=submission_id, filename="model.py")
    winner = next(r.value for r in results if r.value.status_code == HTTPStatus.CREATED)
    assert winner.json()["sha256"] == row.sha256
    names = stored_names()
    assert len(names) == 2  # main.py and the one model.py
    assert row.storage_name in names


def test_identical_resends_all_succeed_and_store_one_file(
    user: User, client_for: Callable[[User], APIClient], stored_names: Callable[[], list[str]]
) -> None:
    clients = _clients(user, client_for)
    submission_id = create_submission(clients[0]).json()["submission_id"]

    results = run_concurrently(
        lambda i: add_file(clients[i], submission_id, "config.yaml", b"lr: 0.1\n"), THREADS
    )

    assert _outcomes(results) == {"201": 1, "200": THREADS - 1}
    assert len({r.value.json()["uploaded_at"] for r in results}) == 1
    assert SubmissionFile.objects.filter(submission_id=submission_id).count() == 2
    assert len(stored_names()) == 2


def test_concurrent_uploads_cannot_pass_the_file_limit(
    user: User,
    client_for: Callable[[User], APIClient],
    settings: Any,
    stored_names: Callable[[], list[str]],
) -> None:
    settings.MAX_FILES_PER_SUBMISSION = 4
    clients = _clients(user, client_for)
    submission_id = create_submission(clients[0]).json()["submission_id"]

    results = run_concurrently(
        lambda i: add_file(clients[i], submission_id, f"part{i}.py", b"x"), THREADS
    )

    assert _outcomes(results) == {"201": 3, "too_many_files": THREADS - 3}
    assert SubmissionFile.objects.filter(submission_id=submission_id).count() == 4
    assert len(stored_names()) == 4


def test_sealing_during_uploads_leaves_no_file_behind_the_seal(
    user: User, client_for: Callable[[User], APIClient], stored_names: Callable[[], list[str]]
) -> None:
    """The jobs app seals under the submission lock; each upload lands before it or gets 409."""
    from django.db import transaction

    clients = _clients(user, client_for)
    submission_id = create_submission(clients[0]).json()["submission_id"]
    sealed_with: list[int] = []

    def act(i: int) -> Any:
        if i == 0:
            with transaction.atomic():
                submission = submission_get(submission_id=submission_id, for_update=True)
                sealed_with.append(SubmissionFile.objects.filter(submission=submission).count())
                submission_transition(submission=submission, to=SubmissionStatus.PENDING)
            return None
        return add_file(clients[i], submission_id, f"part{i}.py", b"x")

    results = run_concurrently(act, THREADS)

    uploads = [r.value for r in results[1:]]
    assert all(r.status_code in (HTTPStatus.CREATED, HTTPStatus.CONFLICT) for r in uploads)
    landed = sum(r.status_code == HTTPStatus.CREATED for r in uploads)
    assert sealed_with == [1 + landed]  # every 201 was in the file list the seal saw
    assert Submission.objects.get(pk=submission_id).status == SubmissionStatus.PENDING
    assert SubmissionFile.objects.filter(submission_id=submission_id).count() == 1 + landed
    assert len(stored_names()) == 1 + landed
