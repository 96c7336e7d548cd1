"""Resume and re-runs: a real `yoyaku submit` killed with SIGKILL, then run again; the CI
script of examples/ci run twice for one commit (seed 000)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from apps.jobs.models import Job
from apps.quotas.models import Reservation
from apps.submissions.models import Submission, SubmissionFile
from tests.client.conftest import (
    EXAMPLES,
    HELLO_CONFIG,
    HELLO_MAIN,
    ROOT,
    Cli,
    write_files,
    yoyaku_command,
)
from tests.client.proxy import FaultProxy

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

FILES_PATH = r"^/api/submissions/[0-9a-f]{32}/files/$"
CREATE_PATH = r"^/api/submissions/$"
JOBS_PATH = r"^/api/jobs/$"
MIB = 1024 * 1024


@pytest.fixture
def five_files(tmp_path: Path) -> Path:
    """Sorted: a.py creates the draft; b.py, c.py, config.yaml, main.py follow one by one.

    c.py is 16 MiB: more than the socket buffers between the client and the paused proxy
    can hold, so a client killed at its half has really sent only part of it."""
    filler = "# " + "x" * 1022 + "\n"
    return write_files(
        tmp_path / "five",
        {
            "a.py": filler * 1024,
            "b.py": filler * 1024 + "# b\n",
            "c.py": filler * 16 * 1024,
            "config.yaml": HELLO_CONFIG,
            "main.py": HELLO_MAIN,
        },
    )


def _kill(process: subprocess.Popen[str]) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)  # also closes its pipes
    assert process.returncode == -signal.SIGKILL


def _files(submission: Submission) -> list[str]:
    rows = SubmissionFile.objects.filter(submission=submission)
    return sorted(rows.values_list("filename", flat=True))


def test_killed_halfway_through_an_upload_then_run_again_continues_the_same_draft(
    cli: Cli, proxy: FaultProxy, five_files: Path
) -> None:
    # Hold the second single-file upload (c.py) when half its body has arrived.
    # One file at a time, so that the second is c.py (files at once: test_parallel_upload).
    held = proxy.pause("POST", FILES_PATH, skip=1)
    process = cli.via(proxy.url).popen("submit", str(five_files), "--json", "--parallel", "1")
    assert held.reached.wait(timeout=60), "the upload never reached c.py"
    _kill(process)
    held.go.set()  # the dead client's half body never reaches the server

    submission = Submission.objects.get()
    assert _files(submission) == ["a.py", "b.py"]
    assert Job.objects.count() == 0

    again = cli.via(proxy.url).json("submit", str(five_files))

    assert again["submission_id"] == submission.pk
    assert again["resumed"] is True
    assert {f["filename"]: f["action"] for f in again["files"]} == {
        "a.py": "already stored",
        "b.py": "already stored",
        "c.py": "uploaded",
        "config.yaml": "uploaded",
        "main.py": "uploaded",
    }
    assert Submission.objects.count() == 1
    assert _files(submission) == ["a.py", "b.py", "c.py", "config.yaml", "main.py"]
    assert SubmissionFile.objects.count() == 5  # every file once
    assert [j.pk for j in Job.objects.all()] == [again["job_id"]]
    # The second run sent only what was missing: a, b (2) + c, config, main (3) in all.
    assert proxy.count("POST", CREATE_PATH) == 1
    assert proxy.count("POST", FILES_PATH) == 1 + 1 + 3


def test_killed_while_the_job_request_was_in_flight_then_run_again_matches_that_job(
    cli: Cli, proxy: FaultProxy, five_files: Path
) -> None:
    held = proxy.pause("POST", JOBS_PATH)
    process = cli.via(proxy.url).popen("submit", str(five_files), "--json")
    assert held.reached.wait(timeout=60)
    _kill(process)
    held.go.set()  # the request goes on: the server creates the job nobody hears of
    for _ in range(100):
        if Job.objects.exists():
            break
        time.sleep(0.1)
    job = Job.objects.get()

    again = cli.via(proxy.url).json("submit", str(five_files))

    assert again["job_id"] == job.pk
    assert again["matched_existing"] is True
    assert Job.objects.count() == 1
    assert Submission.objects.count() == 1
    assert SubmissionFile.objects.count() == 5


def test_resume_without_the_local_state_file_finds_the_draft_on_the_server(
    cli: Cli, proxy: FaultProxy, five_files: Path, tmp_path: Path
) -> None:
    held = proxy.pause("POST", FILES_PATH, skip=1)
    process = cli.via(proxy.url).popen("submit", str(five_files), "--json")
    assert held.reached.wait(timeout=60)
    _kill(process)
    held.go.set()
    # A fresh CI runner: no state file, only the server's list.
    shutil.rmtree(tmp_path / "yoyaku-config" / "uploads")

    again = cli.via(proxy.url).json("submit", str(five_files))

    assert again["resumed"] is True
    assert Submission.objects.count() == 1
    assert SubmissionFile.objects.count() == 5
    assert Job.objects.count() == 1


def test_changed_files_with_the_default_key_make_a_new_submission(cli: Cli, tmp_path: Path) -> None:
    folder = write_files(tmp_path / "p", {"main.py": HELLO_MAIN, "config.yaml": HELLO_CONFIG})
    first = cli.json("submit", str(folder))
    (folder / "config.yaml").write_text(HELLO_CONFIG.replace("1, 2, 3", "3, 2, 1"))
    second = cli.json("submit", str(folder))
    assert second["job_id"] != first["job_id"]
    assert second["idempotency_key"] != first["idempotency_key"]
    assert second["matched_existing"] is False
    assert Job.objects.count() == 2


def _ci(cli: Cli, commit: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(EXAMPLES / "ci" / "submit.sh"), "--json"],
        env=cli.env(
            GITHUB_SHA=commit,
            GITHUB_REPOSITORY="lab/model",
            YOYAKU=yoyaku_command()[0],
            **env,
        ),
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        check=False,
    )


def test_ci_script_twice_for_one_commit_matches_the_existing_job(
    cli: Cli, grading: Any, tmp_path: Path
) -> None:
    commit = "3f2a9c0e5b7d4e1f8a6b2c9d0e1f2a3b4c5d6e7f"
    first = _ci(cli, commit, YOYAKU_WAIT_TIMEOUT="120")
    assert first.returncode == 0, first.stderr
    created = json.loads(first.stdout)
    assert created["status"] == "completed"
    assert created["score"] == 1.0
    assert created["idempotency_key"] == f"ci-lab/model-{commit}"
    assert "Using idempotency key: ci-lab/model-" in first.stderr

    # The same pipeline again for the same commit (a re-run), on a fresh runner: no state.
    shutil.rmtree(tmp_path / "yoyaku-config", ignore_errors=True)
    second = _ci(cli, commit, YOYAKU_WAIT_TIMEOUT="120")
    assert second.returncode == 0, second.stderr
    matched = json.loads(second.stdout)
    assert matched["job_id"] == created["job_id"]
    assert matched["matched_existing"] is True
    assert matched["idempotent_hit"] is True
    assert f"Matched existing job {created['job_id']}" in second.stderr
    assert Job.objects.count() == 1

    # Without --json, the human line says so too.
    third = subprocess.run(
        ["bash", str(EXAMPLES / "ci" / "submit.sh")],
        env=cli.env(
            GITHUB_SHA=commit,
            GITHUB_REPOSITORY="lab/model",
            YOYAKU=yoyaku_command()[0],
            YOYAKU_WAIT_TIMEOUT="0",
        ),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert third.returncode == 0, third.stderr
    assert "Matched existing job" in third.stderr
    assert third.stdout.strip() == created["job_id"]

    # Another commit is another job.
    other = _ci(cli, "0" * 40, YOYAKU_WAIT_TIMEOUT="0")
    assert other.returncode == 0, other.stderr
    assert json.loads(other.stdout)["job_id"] != created["job_id"]
    assert Job.objects.count() == 2


def test_examples_are_graded_in_the_sandbox(cli: Cli, grading: Any) -> None:
    hello = cli.json("submit", str(EXAMPLES / "hello"), "--wait", "--timeout", "120")
    assert (hello["status"], hello["score"], hello["submission_status"]) == (
        "completed",
        1.0,
        "completed",
    )
    review = cli.json("submit", str(EXAMPLES / "needs-review"), "--wait", "--timeout", "120")
    assert (review["status"], review["submission_status"]) == ("completed", "review_pending")
    assert "hello from hello: 3/3 correct" in Job.objects.get(pk=hello["job_id"]).logs


def test_big_files_stream_with_checksums(cli: Cli, tmp_path: Path) -> None:
    folder = write_files(
        tmp_path / "big",
        {"main.py": HELLO_MAIN, "config.yaml": HELLO_CONFIG, "data.py": "#" * (8 * MIB)},
    )
    body = cli.json("submit", str(folder))
    stored = SubmissionFile.objects.get(filename="data.py")
    assert stored.size == 8 * MIB
    assert stored.sha256 == {f["filename"]: f["sha256"] for f in body["files"]}["data.py"]


def test_ctrl_c_mid_upload_releases_the_reservation_and_a_rerun_finishes(
    cli: Cli, proxy: FaultProxy, five_files: Path
) -> None:
    held = proxy.pause("POST", FILES_PATH, skip=1)
    process = cli.via(proxy.url).popen("submit", str(five_files), "--reserve", "--json")
    assert held.reached.wait(timeout=60)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    held.go.set()

    assert process.returncode == 130, err
    assert "run the same command again" in err
    reservation = Reservation.objects.get()
    assert reservation.released_at is not None
    assert Job.objects.count() == 0

    again = cli.via(proxy.url).json("submit", str(five_files), "--reserve")

    assert again["resumed"] is True
    assert SubmissionFile.objects.count() == 5
    assert Job.objects.get().pk == again["job_id"]
    assert Reservation.objects.get(pk=again["reservation_id"]).job_id == again["job_id"]


def test_reserve_extends_the_slot_while_a_slow_upload_runs(
    cli: Cli, proxy: FaultProxy, five_files: Path
) -> None:
    held = proxy.pause("POST", FILES_PATH)
    process = cli.via(proxy.url).popen(
        "submit", str(five_files), "--reserve", "--reserve-ttl", "10", "--json"
    )
    assert held.reached.wait(timeout=60)
    reservation = Reservation.objects.get()
    first_expiry = reservation.expires_at
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proxy.count("POST", r"/extend/$") < 2:
        time.sleep(0.2)
    held.go.set()
    out, err = process.communicate(timeout=120)

    assert process.returncode == 0, err
    assert proxy.count("POST", r"/extend/$") >= 2  # every ttl/3 while the upload was held
    reservation.refresh_from_db()
    assert reservation.expires_at > first_expiry
    assert reservation.job_id == json.loads(out)["job_id"]  # the held slot became the job's
