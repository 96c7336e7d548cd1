"""The default SubprocessGrader, end to end through grade_job with real child processes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from apps.jobs.models import Job, JobStatus
from apps.review.sandbox import SANDBOX_PATH, sandbox_uid
from apps.review.tasks import grade_job
from apps.submissions.models import Submission, SubmissionStatus
from tests.review.factories import make_job, make_submission, tar_gz_bytes, zip_bytes

pytestmark = pytest.mark.django_db

GOOD = """
import json, sys
config = open(sys.argv[1]).read()
print("graded with", config.strip())
json.dump({"score": 0.9, "needs_review": False}, open("metrics.json", "w"))
"""


@pytest.fixture(autouse=True, params=[True, False], ids=["zygote", "spawn"])
def _small_limits(settings: Any, request: pytest.FixtureRequest) -> None:
    """Every test runs with programs forked by the worker's zygote and spawned afresh."""
    settings.GRADER = "apps.review.grader.SubprocessGrader"
    settings.GRADING_ZYGOTE = request.param
    settings.GRADING_TIMEOUT = 3
    settings.GRADING_MEMORY_LIMIT = 512 * 1024 * 1024
    settings.GRADING_MAX_OUTPUT = 64 * 1024
    settings.GRADING_MAX_UNPACKED_SIZE = 4 * 1024 * 1024


def _grade(user: User, program: str | None, **kwargs: Any) -> tuple[Submission, Job]:
    submission = make_submission(user, program=program, **kwargs)
    job = make_job(submission)
    grade_job(job.pk)
    submission.refresh_from_db()
    job.refresh_from_db()
    return submission, job


def _assert_worker_survives(user: User) -> None:
    submission, job = _grade(user, GOOD, question_id="after")
    assert submission.status == SubmissionStatus.COMPLETED
    assert job.status == JobStatus.COMPLETED


def test_program_runs_with_its_config_and_scores(user: User) -> None:
    submission, job = _grade(user, GOOD)

    assert submission.status == SubmissionStatus.COMPLETED
    assert submission.score == 0.9
    assert job.status == JobStatus.COMPLETED
    assert "graded with answer: 42" in job.logs


@pytest.mark.parametrize(
    ("metrics", "expected"),
    [
        ({"score": 1, "needs_review": True}, SubmissionStatus.REVIEW_PENDING),
        ({"needs_review": False}, SubmissionStatus.REVIEW_PENDING),
        ({"score": "high"}, SubmissionStatus.REVIEW_PENDING),
        ([1, 2], SubmissionStatus.REVIEW_PENDING),
        ({"score": 0}, SubmissionStatus.COMPLETED),
    ],
)
def test_metrics_decide_completed_or_review_pending(
    user: User, metrics: Any, expected: str
) -> None:
    program = f"import json\njson.dump({metrics!r}, open('metrics.json', 'w'))\n"
    submission, job = _grade(user, program)

    assert submission.status == expected
    assert job.status == JobStatus.COMPLETED


def test_missing_metrics_goes_to_review(user: User) -> None:
    submission, job = _grade(user, "print('no metrics')\n")

    assert submission.status == SubmissionStatus.REVIEW_PENDING
    assert "no metrics.json" in submission.status_reason
    assert job.status == JobStatus.COMPLETED


def test_nonzero_exit_fails_with_reason_and_logs(user: User) -> None:
    submission, job = _grade(user, "import sys\nprint('boom')\nsys.exit(3)\n")

    assert submission.status == SubmissionStatus.FAILED
    assert "exit code 3" in submission.status_reason
    assert job.status == JobStatus.FAILED
    assert "boom" in job.logs
    assert job.error == submission.status_reason


def test_metrics_symlink_is_refused(user: User) -> None:
    program = "import os\nos.symlink('/etc/passwd', 'metrics.json')\n"
    submission, _ = _grade(user, program)

    assert submission.status == SubmissionStatus.REVIEW_PENDING or (
        submission.status == SubmissionStatus.FAILED
    )
    assert "root:" not in submission.status_reason


def test_environment_has_no_secrets(user: User, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = {
        "DATABASE_URL": "postgres://u:dbpass@127.0.0.1/x",
        "SECRET_KEY": "django-secret-value",
        "REDIS_URL": "redis://:redispass@127.0.0.1/0",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
        "AWS_ACCESS_KEY_ID": "aws-key-id",
        "GITHUB_TOKEN": "ghp_tokenvalue",
        "SCHEDULE_WEBHOOK_SECRET": "whsec_webhookvalue",
        "PYTHONPATH": "/opt/yoyaku-pythonpath-value",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    program = """
import json, os
print(json.dumps(dict(os.environ)))
json.dump({"score": 1}, open("metrics.json", "w"))
"""
    submission, job = _grade(user, program)

    assert submission.status == SubmissionStatus.COMPLETED
    seen = json.loads(job.logs.strip().splitlines()[-1])
    for name, value in secrets.items():
        assert name not in seen
        assert value not in job.logs
    assert set(seen) <= {
        "PATH",
        "LANG",
        "HOME",
        "TMPDIR",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "LC_CTYPE",
        "LC_ALL",
        "TZ",
        "LANGUAGE",
    }
    assert "yoyaku-grade-" in seen["HOME"]
    assert seen["PATH"] == SANDBOX_PATH
    assert str(settings.BASE_DIR) not in job.logs


def _processes_of_uid(uid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if fields.get("State", "").startswith("Z"):
            continue
        if fields.get("Uid", "").split("\t")[0] == str(uid):
            pids.append(int(entry))
    return pids


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid check needs a root worker")
def test_fork_bomb_is_stopped_and_every_process_killed(user: User, settings: Any) -> None:
    settings.GRADING_TIMEOUT = 2
    program = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
    submission, job = _grade(user, program)

    assert submission.status == SubmissionStatus.FAILED
    assert "Timed out" in submission.status_reason
    assert job.status == JobStatus.FAILED
    assert _processes_of_uid(sandbox_uid()) == []
    _assert_worker_survives(user)


def test_memory_hog_is_stopped(user: User, settings: Any) -> None:
    settings.GRADING_MEMORY_LIMIT = 128 * 1024 * 1024
    program = """
chunks = []
while True:
    chunks.append(bytearray(8 * 1024 * 1024))
"""
    submission, job = _grade(user, program)

    assert submission.status == SubmissionStatus.FAILED
    assert "The program failed" in submission.status_reason
    assert "MemoryError" in job.logs
    _assert_worker_survives(user)


def test_huge_file_is_stopped(user: User, settings: Any) -> None:
    settings.GRADING_MAX_UNPACKED_SIZE = 1024 * 1024
    program = """
with open("huge.bin", "wb") as out:
    while True:
        out.write(b"x" * 65536)
"""
    submission, job = _grade(user, program)

    assert submission.status == SubmissionStatus.FAILED
    assert "The program failed" in submission.status_reason
    assert "File too large" in job.logs
    _assert_worker_survives(user)


def test_infinite_loop_is_stopped_by_the_wall_clock(user: User, settings: Any) -> None:
    settings.GRADING_TIMEOUT = 1
    submission, job = _grade(user, "import time\nwhile True:\n    time.sleep(0.01)\n")

    assert submission.status == SubmissionStatus.FAILED
    assert "Timed out after GRADING_TIMEOUT (1 s)" in submission.status_reason
    assert job.status == JobStatus.FAILED
    _assert_worker_survives(user)


def test_background_child_does_not_outlive_the_program(user: User) -> None:
    program = """
import json, os, time
pid = os.fork()
if pid == 0:
    time.sleep(60)
    os._exit(0)
json.dump({"score": 1, "child": pid}, open("metrics.json", "w"))
print("child", pid)
"""
    submission, job = _grade(user, program)

    assert submission.status == SubmissionStatus.COMPLETED, (submission.status_reason, job.logs)
    child = int(job.logs.split("child", 1)[1].split()[0])
    stat = Path(f"/proc/{child}/stat")
    assert not stat.exists() or stat.read_text().split(") ", 1)[1].startswith(("Z", "X"))


def test_output_is_capped(user: User, settings: Any) -> None:
    settings.GRADING_MAX_OUTPUT = 1000
    program = (
        "import json\nprint('y' * 100000)\njson.dump({'score': 1}, open('metrics.json', 'w'))\n"
    )
    submission, job = _grade(user, program)

    assert submission.status == SubmissionStatus.COMPLETED
    assert job.logs.startswith("y" * 1000)
    assert "[output truncated:" in job.logs
    assert len(job.logs) < 1200


def test_zip_archive_is_unpacked_into_the_scratch_folder(user: User) -> None:
    archive = zip_bytes({"pkg/__init__.py": b"", "pkg/lib.py": b"SCORE = 0.5\n"})
    program = (
        "import json\nfrom pkg.lib import SCORE\n"
        "json.dump({'score': SCORE}, open('metrics.json', 'w'))\n"
    )
    submission, _ = _grade(user, program, extra_files={"code.zip": archive})

    assert submission.status == SubmissionStatus.COMPLETED
    assert submission.score == 0.5


def test_tar_gz_archive_is_unpacked(user: User) -> None:
    archive = tar_gz_bytes({"data/value.txt": b"0.25"})
    program = (
        "import json\nvalue = float(open('data/value.txt').read())\n"
        "json.dump({'score': value}, open('metrics.json', 'w'))\n"
    )
    submission, _ = _grade(user, program, extra_files={"data.tar.gz": archive})

    assert (submission.status, submission.score) == (SubmissionStatus.COMPLETED, 0.25)


@pytest.mark.parametrize(
    ("filename", "archive", "reason"),
    [
        ("evil.zip", zip_bytes({"../escape.py": b"x"}), "Unsafe archive member"),
        ("abs.zip", zip_bytes({"/etc/x.py": b"x"}), "Unsafe archive member"),
        ("link.tar.gz", tar_gz_bytes({}, symlink=("l", "/etc/passwd")), "not a plain file"),
        (
            "over.zip",
            zip_bytes({"big.bin": b"\0" * (5 * 1024 * 1024)}),
            "GRADING_MAX_UNPACKED_SIZE",
        ),
        ("clash.zip", zip_bytes({"main.py": b"print('replaced')"}), "would overwrite"),
        ("broken.zip", b"PK\x03\x04 not really", "Cannot unpack"),
    ],
    ids=["parent-path", "absolute-path", "symlink", "over-size", "overwrite", "unreadable"],
)
def test_unsafe_archives_fail_with_reason(
    user: User, filename: str, archive: bytes, reason: str
) -> None:
    submission, job = _grade(user, GOOD, extra_files={filename: archive})

    assert submission.status == SubmissionStatus.FAILED
    assert reason in submission.status_reason
    assert job.status == JobStatus.FAILED


def test_missing_entrypoint_fails(user: User) -> None:
    submission = make_submission(user)
    job = make_job(submission)

    grade_job(job.pk)

    submission.refresh_from_db()
    assert submission.status == SubmissionStatus.FAILED
    assert "Entrypoint 'main.py' not found" in submission.status_reason
