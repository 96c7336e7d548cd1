"""A submission whose only file is over `MAX_UPLOAD_FILE_SIZE`: `yoyaku submit` (the real
console script against a live server, through a real proxy) creates the draft from the file's
resumable upload. Killed with SIGKILL mid-upload, or after the draft was created but before
its job, then run again: one submission, one job, the file's right sha256."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from apps.jobs.models import Job
from apps.submissions.models import ResumableUpload, Submission, SubmissionFile
from tests.benchmarks.bundles import EXAMPLE, grant_add_challenge
from tests.client.conftest import Cli, token_for, write_files
from tests.client.proxy import FaultProxy
from tests.factories.users import make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MIB = 1024 * 1024
UPLOAD_PATH = r"^/api/uploads/[^/]+/$"
PHASE = ("--challenge", "digits", "--phase", "dev")


@pytest.fixture
def digits(cli: Cli, tmp_path: Path, settings: Any) -> None:
    """The example challenge, the CLI's user an approved participant; files over 1 MiB are
    large (resumable)."""
    folder = tmp_path / "digits"
    shutil.copytree(EXAMPLE, folder)
    host = cli.as_user(token_for(grant_add_challenge(make_user(username="hana"))))
    host.json("challenge", "push", str(folder))
    answer = httpx.post(
        f"{cli.url}/api/challenges/digits/participate/",
        headers={"Authorization": f"Bearer {cli.token}"},
    )
    assert answer.json()["status"] == "approved", answer.text
    settings.MAX_UPLOAD_FILE_SIZE = MIB


def _predictions(size: int) -> bytes:
    rows = b"".join(b"%d,%d\n" % (i, i % 10) for i in range(size // 4))
    return (b"id,label\n" + rows)[:size]


def _kill(process: subprocess.Popen[str]) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL


def _assert_one_submission(again: dict[str, Any], data: bytes) -> None:
    submission = Submission.objects.get()
    assert (again["submission_id"], submission.kind) == (submission.pk, "predictions")
    stored = SubmissionFile.objects.get(submission=submission)
    assert (stored.filename, stored.size) == ("predictions.csv", len(data))
    assert stored.sha256 == hashlib.sha256(data).hexdigest()
    assert [j.pk for j in Job.objects.all()] == [again["job_id"]]
    assert ResumableUpload.objects.get().attached_at is not None


def test_only_a_large_file_killed_mid_upload_then_run_again(
    cli: Cli, proxy: FaultProxy, tmp_path: Path, digits: None
) -> None:
    data = _predictions(6 * MIB)
    folder = write_files(tmp_path / "big", {"predictions.csv": data})
    held = proxy.pause("PATCH", UPLOAD_PATH, skip=2)
    process = cli.via(proxy.url).popen(
        "submit", str(folder), *PHASE, "--json", YOYAKU_UPLOAD_CHUNK_SIZE=str(MIB)
    )
    assert held.reached.wait(timeout=120), "the upload never reached its third PATCH"
    _kill(process)
    held.go.set()
    # The dead client's third body reaches the server whole or not at all: count after that.
    assert held.done.wait(timeout=120), "the proxy never finished with the held request"
    assert not Submission.objects.exists()
    before = proxy.body_bytes("PATCH", UPLOAD_PATH)

    again = cli.via(proxy.url).json(
        "submit", str(folder), *PHASE, YOYAKU_UPLOAD_CHUNK_SIZE=str(MIB)
    )

    assert proxy.body_bytes("PATCH", UPLOAD_PATH) - before < len(data) - 2 * MIB + 1
    assert proxy.count("POST", r"^/api/uploads/$") == 1
    assert proxy.count("POST", r"^/api/submissions/$") == 1
    assert {f["filename"]: f["action"] for f in again["files"]} == {"predictions.csv": "resumed"}
    _assert_one_submission(again, data)
    assert list((cli.config_dir / "uploads").glob("resumable-*.json")) == []


def test_killed_after_the_draft_was_created_then_run_again(
    cli: Cli, proxy: FaultProxy, tmp_path: Path, digits: None
) -> None:
    data = _predictions(3 * MIB)
    folder = write_files(tmp_path / "big", {"predictions.csv": data})
    held = proxy.pause("POST", r"^/api/jobs/$")
    process = cli.via(proxy.url).popen("submit", str(folder), *PHASE, "--json")
    assert held.reached.wait(timeout=120), "the submit never asked for its job"
    _kill(process)
    held.go.set()
    assert Submission.objects.count() == 1
    assert not Job.objects.exists()

    again = cli.via(proxy.url).json("submit", str(folder), *PHASE)

    assert proxy.count("POST", r"^/api/uploads/$") == 1
    assert proxy.count("POST", r"^/api/submissions/$") == 1
    assert again["files"][0]["action"] == "already stored"
    _assert_one_submission(again, data)
