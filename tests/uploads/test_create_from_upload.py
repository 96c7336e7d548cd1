"""A submission whose first file is a finished upload (POST /api/submissions/ with `upload_id`
and `filename`): every rule of creation and of attach applies, and a refusal leaves no draft
(nor a phase entry) while the upload stays unattached and usable."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from rest_framework.test import APIClient

from apps.benchmarks.models import Entry
from apps.submissions.exceptions import UploadAttached
from apps.submissions.models import ResumableUpload, Submission, SubmissionFile
from apps.submissions.resumable import store
from apps.submissions.services.create_upload import submission_create_from_upload
from tests.benchmarks.phases import apply_challenge, make_host, participate
from tests.concurrency import run_concurrently
from tests.factories.users import make_user
from tests.uploads.requests import send
from tests.uploads.test_attach import V8, finished_upload

pytestmark = pytest.mark.django_db(transaction=True)

Clients = Callable[[User], APIClient]
LARGE = b"id,label\n" + b"".join(b"%d,%d\n" % (i, i % 10) for i in range(200_000))
AFTER_THE_END = dt.datetime(2027, 2, 1, tzinfo=dt.UTC)


@pytest.fixture
def pat(db: None) -> User:
    return make_user(username="pat")


@pytest.fixture
def pat_client(pat: User, client_for: Clients) -> APIClient:
    return client_for(pat)


@pytest.fixture
def digits(client_for: Clients, pat_client: APIClient) -> None:
    apply_challenge(client_for(make_host()))
    assert participate(pat_client) == "approved"


def create(client: APIClient, upload_id: str, filename: str, **fields: Any) -> Any:
    body = {"upload_id": upload_id, "filename": filename, **fields}
    return client.post("/api/submissions/", body, format="json")


def to_dev(client: APIClient, upload_id: str, filename: str = "predictions.csv") -> Any:
    return create(client, upload_id, filename, challenge="digits", phase="dev")


def assert_untouched(upload_id: str, data: bytes) -> None:
    assert not Submission.objects.exists()
    assert not SubmissionFile.objects.exists()
    assert not Entry.objects.exists()
    upload = ResumableUpload.objects.get(pk=upload_id)
    assert upload.attached_at is None
    assert store.local_path(upload.storage_key).read_bytes() == data


@override_settings(MAX_UPLOAD_FILE_SIZE=1024)
def test_a_predictions_submission_from_one_large_upload(
    digits: None, pat_client: APIClient
) -> None:
    upload_id = finished_upload(pat_client, LARGE)
    response = to_dev(pat_client, upload_id)
    assert response.status_code == HTTPStatus.CREATED, response.json()
    body = response.json()
    assert (body["kind"], body["status"], body["entrypoint"]) == ("predictions", "draft", "")
    [file] = body["files"]
    assert (file["filename"], file["size"]) == ("predictions.csv", len(LARGE))
    assert file["sha256"] == hashlib.sha256(LARGE).hexdigest()
    assert Entry.objects.filter(submission_id=body["submission_id"]).count() == 1
    assert ResumableUpload.objects.get().attached_at is not None
    enqueued = pat_client.post(
        "/api/jobs/", {"submission_id": body["submission_id"]}, format="json"
    )
    assert enqueued.status_code == HTTPStatus.CREATED, enqueued.json()


def test_a_form_with_the_upload_besides_files_sent_whole(
    user_client: APIClient,
) -> None:
    upload_id = finished_upload(user_client, b"print('large')\n")
    response = user_client.post(
        "/api/submissions/",
        {
            "upload_id": upload_id,
            "filename": "main.py",
            "files": [SimpleUploadedFile("config.yaml", b"a: 1\n")],
            "metadata": '{"method": "m"}',
        },
        format="multipart",
    )
    assert response.status_code == HTTPStatus.CREATED, response.json()
    names = sorted(f["filename"] for f in response.json()["files"])
    assert names == ["config.yaml", "main.py"]
    assert response.json()["metadata"] == {"method": "m"}


@pytest.mark.parametrize(
    ("filename", "fields", "status", "code"),
    [
        ("predictions.txt", {}, HTTPStatus.BAD_REQUEST, "invalid_extension"),
        ("../predictions.csv", {}, HTTPStatus.BAD_REQUEST, "invalid_filename"),
        ("predictions.csv", {"phase": "nope"}, HTTPStatus.NOT_FOUND, "not_found"),
        ("predictions.csv", {"metadata": "[1]"}, HTTPStatus.BAD_REQUEST, "invalid_request"),
    ],
)
def test_a_refused_creation_leaves_no_draft_and_the_upload_usable(
    digits: None,
    pat_client: APIClient,
    filename: str,
    fields: dict[str, str],
    status: HTTPStatus,
    code: str,
) -> None:
    upload_id = finished_upload(pat_client, LARGE)
    body = {"challenge": "digits", "phase": "dev", **fields}
    response = create(pat_client, upload_id, filename, **body)
    assert (response.status_code, response.json()["code"]) == (status, code), response.json()
    assert_untouched(upload_id, LARGE)
    assert to_dev(pat_client, upload_id).status_code == HTTPStatus.CREATED


def test_not_participant_and_phase_closed_leave_no_draft(
    digits: None, pat_client: APIClient, client_for: Clients
) -> None:
    stranger = client_for(make_user(username="sam"))
    theirs = finished_upload(stranger, LARGE)
    refused = to_dev(stranger, theirs)
    assert (refused.status_code, refused.json()["code"]) == (
        HTTPStatus.FORBIDDEN,
        "not_participant",
    )
    assert_untouched(theirs, LARGE)
    upload_id = finished_upload(pat_client, LARGE)
    with time_machine.travel(AFTER_THE_END, tick=True):
        closed = to_dev(pat_client, upload_id)
    assert (closed.status_code, closed.json()["code"]) == (HTTPStatus.CONFLICT, "phase_closed")
    assert not Submission.objects.exists()
    assert ResumableUpload.objects.get(pk=upload_id).attached_at is None


def test_unfinished_attached_and_foreign_uploads_are_refused_without_a_draft(
    digits: None, pat_client: APIClient, other_client: APIClient
) -> None:
    partial = send(
        pat_client, "POST", "/api/uploads/", b"id,", headers={"Upload-Complete": "?0", **V8}
    )
    incomplete = to_dev(pat_client, partial.json()["upload_id"])
    assert (incomplete.status_code, incomplete.json()["code"]) == (
        HTTPStatus.CONFLICT,
        "upload_incomplete",
    )
    foreign = to_dev(pat_client, finished_upload(other_client, LARGE))
    assert foreign.status_code == HTTPStatus.NOT_FOUND
    assert foreign.json()["code"] == "not_found"
    assert not Submission.objects.exists()
    upload_id = finished_upload(pat_client, LARGE)
    assert to_dev(pat_client, upload_id).status_code == HTTPStatus.CREATED
    again = to_dev(pat_client, upload_id)
    assert (again.status_code, again.json()["code"]) == (HTTPStatus.CONFLICT, "upload_attached")
    assert Submission.objects.count() == 1
    assert Entry.objects.count() == 1


def test_racing_creations_from_one_upload_make_one_draft(
    user: User, user_client: APIClient
) -> None:
    data = os.urandom(300_000)
    upload_id = finished_upload(user_client, data)
    writers = 4
    outcomes = run_concurrently(
        lambda i: submission_create_from_upload(
            user=user,
            upload_id=upload_id,
            filename="main.py",
        ),
        writers,
    )
    winners = [outcome for outcome in outcomes if outcome.ok]
    assert len(winners) == 1
    assert all(isinstance(o.error, UploadAttached) for o in outcomes if not o.ok)
    [draft] = Submission.objects.all()
    assert draft.pk == winners[0].value.pk
    [file] = SubmissionFile.objects.all()
    assert file.sha256 == hashlib.sha256(data).hexdigest()
    assert store.local_path(file.storage_name).read_bytes() == data


def test_a_code_submission_refuses_a_blank_entrypoint_without_a_draft(
    user_client: APIClient,
) -> None:
    upload_id = finished_upload(user_client, b"print(1)\n")
    response = create(user_client, upload_id, "main.py", entrypoint="")
    assert (response.status_code, response.json()["code"]) == (
        HTTPStatus.BAD_REQUEST,
        "invalid_request",
    )
    assert "entrypoint" in response.json()["fields"]
    assert_untouched(upload_id, b"print(1)\n")
