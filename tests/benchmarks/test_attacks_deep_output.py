"""Folders nested 1,500 deep, from a code phase's `/output` or inside an uploaded archive, run
for real in bubblewrap.

Found: the worker walked the folders it hands to the sandbox with Python 3.11's recursive
`os.walk` (and removed them with the recursive `shutil.rmtree`): 1,500 levels were a
RecursionError in the worker, graded as a platform fault (`scoring_failed`, refunded: a free
submission as often as wanted, its logs lost) and the folder was left on the worker's disk.
Now a path deeper than `MAX_MEMBER_DEPTH` folders is refused where the tree is made: the
output stream, and every archive (the upload's check and the grader's unpacking alike)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.benchmarks.models import Entry
from apps.core.archives import MAX_MEMBER_DEPTH
from apps.grading.phases import SCORING_FAILED
from apps.jobs.services.submission import job_submit
from apps.submissions.models import Submission, SubmissionKind
from tests.benchmarks.phases import participate, submit_to_phase
from tests.benchmarks.scoring import (
    apply_bundle,
    graded,
    host_user,
    phase_draft,
    phase_of,
    program,
    zipped,
)
from tests.factories.submissions import add_file
from tests.grading.conftest import sandbox_settings  # noqa: F401 - the fixture

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sandbox_settings")]

LEVELS = 1500
DEEP_OUTPUT = f"""
import os
open("/output/predictions.csv", "w").write("id,label\\n")
os.chdir("/output")
for _ in range({LEVELS}):
    os.mkdir("a")
    os.chdir("a")
print("DEEP", len(os.getcwd()), flush=True)
"""
DEEP_ZIP = zipped({"a/" * LEVELS + "predictions.csv": b"id,label\n"})


def _with_zip(document: dict[str, Any]) -> None:
    for phase in document["phases"]:
        phase["file_types"] = [".csv", ".zip"]


def _graded_enqueued(user: User, phase_slug: str, files: dict[str, bytes]) -> Entry:
    challenge = apply_bundle(host_user(), change=_with_zip)
    phase = phase_of(challenge, phase_slug)
    submission = phase_draft(user, phase, {})
    kind = SubmissionKind.CODE if phase.kind == "code" else SubmissionKind.PREDICTIONS
    Submission.objects.filter(pk=submission.pk).update(kind=kind)
    for filename, content in files.items():
        add_file(submission, filename, content)
    job = job_submit(user=user, submission_id=submission.pk).job  # counted by the phase check
    assert Entry.objects.get(pk=submission.pk).counted
    submission, job, entry = graded(submission, job)
    assert submission.status == "failed"
    assert entry.failure != SCORING_FAILED, entry.scoring_logs  # no platform fault
    assert (entry.counted, entry.refund_reason) == (True, "")  # it counts: no free submission
    assert f"deeper than {MAX_MEMBER_DEPTH} folders" in submission.status_reason
    return entry


def test_a_deep_output_folder_is_the_participants_own_counted_failure(user: User) -> None:
    entry = _graded_enqueued(user, "code", program(DEEP_OUTPUT))
    assert entry.submission.jobs.get().logs.startswith("DEEP")  # the run's logs are kept


def test_a_deep_archive_stored_by_other_means_is_refused_by_the_grader(user: User) -> None:
    _graded_enqueued(user, "dev", {"deep.zip": DEEP_ZIP})


def test_a_deep_archive_is_refused_at_upload(client_for: Any) -> None:
    apply_bundle(host_user(), change=_with_zip)
    client: APIClient = client_for(User.objects.create(username="pat"))
    participate(client)
    response = submit_to_phase(client, "dev", [("deep.zip", DEEP_ZIP)])
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert response.json()["code"] == "unsafe_archive"
    assert f"deeper than {MAX_MEMBER_DEPTH} folders" in response.json()["error"]
