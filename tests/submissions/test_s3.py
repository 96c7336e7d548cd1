"""The same upload path on django-storages' S3 backend, against moto's S3 server on loopback
(no real S3 is reachable from the test machines)."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import uuid
from collections.abc import Callable, Iterator
from http import HTTPStatus
from typing import Any

import boto3
import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone
from moto.server import ThreadedMotoServer
from rest_framework.test import APIClient

from apps.submissions.models import SubmissionFile
from tests.concurrency import run_concurrently
from tests.submissions.conftest import add_file, create_submission, sha

CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3(s3_endpoint: str, settings: Any) -> Any:
    """A fresh bucket, made the default storage; returns a boto3 client on it."""
    bucket = f"yoyaku-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", **CREDENTIALS)
    client.create_bucket(Bucket=bucket)
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": bucket,
                "endpoint_url": s3_endpoint,
                "region_name": "us-east-1",
                "access_key": CREDENTIALS["aws_access_key_id"],
                "secret_key": CREDENTIALS["aws_secret_access_key"],
                "file_overwrite": False,
                "default_acl": None,
            },
        },
    }
    client.bucket = bucket
    return client


def _keys(s3: Any) -> list[str]:
    listing = s3.list_objects_v2(Bucket=s3.bucket)
    return sorted(item["Key"] for item in listing.get("Contents", []))


def _object_sha(s3: Any, key: str) -> str:
    body = s3.get_object(Bucket=s3.bucket, Key=key)["Body"].read()
    return hashlib.sha256(body).hexdigest()


@pytest.mark.django_db
def test_upload_list_and_checksum_on_s3(user_client: APIClient, s3: Any) -> None:
    created = create_submission(user_client)
    assert created.status_code == HTTPStatus.CREATED
    submission_id = created.json()["submission_id"]
    content = b"\x00\x01binary" * 100_000
    added = add_file(user_client, submission_id, "model.py", content)
    assert added.status_code == HTTPStatus.CREATED

    keys = _keys(s3)
    assert len(keys) == 2
    assert all(key.startswith(f"submissions/{submission_id}/") for key in keys)
    row = SubmissionFile.objects.get(filename="model.py")
    assert row.storage_name in keys
    assert _object_sha(s3, row.storage_name) == sha(content) == added.json()["sha256"]

    listed = user_client.get(f"/api/submissions/{submission_id}/files/").json()["files"]
    assert [f["filename"] for f in listed] == ["main.py", "model.py"]


@pytest.mark.django_db
def test_refused_uploads_leave_no_object_on_s3(user_client: APIClient, s3: Any) -> None:
    submission_id = create_submission(user_client).json()["submission_id"]
    mismatch = add_file(
        user_client, submission_id, "a.py", b"x", headers={"X-Content-SHA256": sha(b"y")}
    )
    assert mismatch.json()["code"] == "checksum_mismatch"
    duplicate = add_file(user_client, submission_id, "MAIN.py", b"other")
    assert duplicate.json()["code"] == "duplicate_filename"
    resend = add_file(user_client, submission_id, "main.py", b"print('hi')\n")
    assert resend.status_code == HTTPStatus.OK
    assert len(_keys(s3)) == 1


@pytest.mark.django_db
def test_draft_cleanup_deletes_objects_on_s3(
    user_client: APIClient, s3: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    submission_id = create_submission(user_client).json()["submission_id"]
    add_file(user_client, submission_id, "b.py", b"b")
    assert len(_keys(s3)) == 2
    later = timezone.now() + dt.timedelta(days=settings.SUBMISSION_DRAFT_TTL_DAYS + 1)
    with time_machine.travel(later, tick=False), django_capture_on_commit_callbacks(execute=True):
        call_command("cleanup", "--only", "drafts", stdout=io.StringIO())
    assert _keys(s3) == []


@pytest.mark.django_db
def test_orphan_objects_of_a_killed_upload_are_swept_on_s3(
    user_client: APIClient, s3: Any, settings: Any
) -> None:
    """A web process killed after storing an upload and before committing its row leaves an
    object no row names (in a draft, or for a submission that was never created): the
    `orphan_files` cleanup deletes it once older than the grace, and nothing else."""
    submission_id = create_submission(user_client).json()["submission_id"]
    kept = _keys(s3)
    for key in (
        f"submissions/{submission_id}/{uuid.uuid4().hex}/main.py",
        f"submissions/{uuid.uuid4().hex}/{uuid.uuid4().hex}/main.py",
    ):
        s3.put_object(Bucket=s3.bucket, Key=key, Body=b"print(1)")
    assert len(_keys(s3)) == len(kept) + 2

    out = io.StringIO()
    call_command("cleanup", "--only", "orphan_files", stdout=out)
    assert "orphan_files: removed 0" in out.getvalue()  # still within the grace
    later = timezone.now() + dt.timedelta(minutes=settings.STORED_ORPHAN_GRACE_MINUTES + 1)
    with time_machine.travel(later, tick=False):
        call_command("cleanup", "--only", "orphan_files", stdout=out)
    assert "orphan_files: removed 2" in out.getvalue()
    assert _keys(s3) == kept


@pytest.mark.django_db(transaction=True)
def test_racing_one_name_on_s3_keeps_exactly_the_winners_object(
    user: User, client_for: Callable[[User], APIClient], s3: Any
) -> None:
    clients = [client_for(user) for _ in range(8)]
    submission_id = create_submission(clients[0]).json()["submission_id"]

    results = run_concurrently(
        lambda i: add_file(clients[i], submission_id, "model.py", f"v{i}".encode()), 8
    )

    codes = [
        str(r.value.status_code) if r.value.status_code < 300 else r.value.json()["code"]
        for r in results
    ]
    assert codes.count("201") == 1
    assert codes.count("duplicate_filename") == 7
    row = SubmissionFile.objects.get(submission_id=submission_id, filename="model.py")
    keys = _keys(s3)
    assert len(keys) == 2
    assert _object_sha(s3, row.storage_name) == row.sha256
