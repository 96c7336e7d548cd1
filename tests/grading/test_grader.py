"""The default SandboxGrader, end to end through grade_job with real sandboxes (bubblewrap).

The attacks a hostile program can try are in test_isolation.py; here: the calling convention,
results, limits and archives."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from apps.grading.isolation import sandbox_host_uid
from apps.grading.isolation.bubblewrap import SANDBOX_PATH, WORK_DIR
from apps.grading.tasks import grade_job
from apps.jobs.models import Job, JobStatus
from apps.submissions.models import Submission, SubmissionStatus
from tests.factories.jobs import make_job
from tests.factories.submissions import make_stored_submission, tar_gz_bytes, zip_bytes
from tests.grading.sandboxes import processes_with_argument, sleep_argument

pytestmark = pytest.mark.django_db

GOOD = """
import json, sys
config = open(sys.argv[1]).read()
print("graded with", config.strip())
json.dump({"score": 0.9, "needs_review": False}, open("metrics.json", "w"))
"""


@pytest.fixture(autouse=True)
def _small_limits(sandbox_settings: Any) -> None:
    """Every test grades in bubblewrap with small limits (tests/review/conftest.py)."""


def _grade(user: User, program: str | None, **kwargs: Any) -> tuple[Submission, Job]:
    submission = make_stored_submission(user, program=program, **kwargs)
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
        "PWD",
    }
    assert seen["HOME"] == WORK_DIR
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
    uid = sandbox_host_uid()
    assert uid is not None
    assert _processes_of_uid(uid) == []
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
    settings.GRADING_SCRATCH_SIZE = 1024 * 1024
    program = """
with open("huge.bin", "wb") as out:
    while True:
        out.write(b"x" * 65536)
"""
    submission, job = _grade(user, program)

    assert submission.status == SubmissionStatus.FAILED
    assert "The program failed" in submission.status_reason
    assert "No space left on device" in job.logs or "File too large" in job.logs
    _assert_worker_survives(user)


def test_infinite_loop_is_stopped_by_the_wall_clock(user: User, settings: Any) -> None:
    settings.GRADING_TIMEOUT = 1
    submission, job = _grade(user, "import time\nwhile True:\n    time.sleep(0.01)\n")

    assert submission.status == SubmissionStatus.FAILED
    assert "Timed out after GRADING_TIMEOUT (1 s)" in submission.status_reason
    assert job.status == JobStatus.FAILED
    _assert_worker_survives(user)


def test_background_child_does_not_outlive_the_program(user: User) -> None:
    marker = sleep_argument(987)
    program = f"""
import json, os
if os.fork() == 0:
    os.execv("/bin/sleep", ["sleep", "{marker}"])
json.dump({{"score": 1}}, open("metrics.json", "w"))
"""
    submission, job = _grade(user, program)

    assert submission.status == SubmissionStatus.COMPLETED, (submission.status_reason, job.logs)
    assert processes_with_argument(marker) == []


def test_output_past_the_kill_limit_stops_the_program(user: User, settings: Any) -> None:
    settings.GRADING_MAX_OUTPUT = 1000
    program = "import sys\nwhile True:\n    sys.stdout.write('z' * 4096)\n"
    submission, job = _grade(user, program)

    assert submission.status == SubmissionStatus.FAILED
    assert "printed more than 16000 bytes" in submission.status_reason
    assert len(job.logs) < 1200
    _assert_worker_survives(user)


def test_output_is_capped(user: User, settings: Any) -> None:
    settings.GRADING_MAX_OUTPUT = 1000
    program = (
        "import json\nprint('y' * 10000)\njson.dump({'score': 1}, open('metrics.json', 'w'))\n"
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
        ("evil.zip", zip_bytes({"../escape.py": b"x"}), "a path that leaves the archive"),
        ("abs.zip", zip_bytes({"/etc/x.py": b"x"}), "an absolute path"),
        ("link.tar.gz", tar_gz_bytes({}, symlink=("l", "/etc/passwd")), "a link"),
        (
            "over.zip",
            zip_bytes({"big.bin": b"\0" * (5 * 1024 * 1024)}),
            "4194304 bytes",
        ),
        ("clash.zip", zip_bytes({"main.py": b"print('replaced')"}), "would overwrite"),
        ("broken.zip", b"PK\x03\x04 not really", "not a readable zip"),
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
    submission = make_stored_submission(user)
    job = make_job(submission)

    grade_job(job.pk)

    submission.refresh_from_db()
    assert submission.status == SubmissionStatus.FAILED
    assert "Entrypoint 'main.py' not found" in submission.status_reason


@pytest.fixture
def grading_environment() -> Any:
    """A separate virtualenv of the system Python holding a package the platform does not have
    (standing for numpy & co.), made readable by the sandbox's uid."""
    import shutil
    import subprocess
    import tempfile

    # Not under /tmp: inside the sandbox /tmp is the program's own (see interpreter_problem).
    folder = Path(tempfile.mkdtemp(prefix="yoyaku-test-gradenv-", dir="/var/tmp"))
    env = folder / "env"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(env)], check=True)
    site = next(env.glob("lib/python3*/site-packages"))
    (site / "gradekit").mkdir()
    (site / "gradekit" / "__init__.py").write_text("VALUE = 0.75\n")
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755)
    yield env
    shutil.rmtree(folder, ignore_errors=True)


def test_a_grading_virtualenv_bound_read_only_works(
    user: User, settings: Any, grading_environment: Path
) -> None:
    settings.GRADING_PYTHON = str(grading_environment / "bin" / "python")
    settings.GRADING_READONLY_PATHS = [str(grading_environment)]
    program = (
        "import json, gradekit\njson.dump({'score': gradekit.VALUE}, open('metrics.json', 'w'))\n"
    )
    submission, job = _grade(user, program)

    assert (submission.status, submission.score) == (SubmissionStatus.COMPLETED, 0.75), job.logs


def test_the_platforms_interpreter_is_refused(user: User, settings: Any) -> None:
    import sys

    settings.GRADING_PYTHON = sys.executable
    submission, _ = _grade(user, GOOD)

    assert submission.status == SubmissionStatus.FAILED
    assert "platform" in submission.status_reason


@pytest.fixture
def no_isolation(settings: Any) -> Any:
    """An interpreter the sandbox cannot see: bubblewrap cannot run it, as on a host without
    bubblewrap. (Its folder is traversable: unsandboxed, the program runs as the sandbox uid.)"""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="yoyaku-test-python-"))
    folder.chmod(0o755)
    outside = folder / "python3"
    outside.symlink_to("/usr/bin/python3")
    settings.GRADING_PYTHON = str(outside)
    yield outside
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def staff_session(staff_user: User) -> Any:
    """/healthz shows the grader's details to staff (or with the metrics token) only."""
    from django.test import Client

    client = Client()
    client.force_login(staff_user)
    return client


def test_without_isolation_and_debug_off_nothing_is_graded(
    user: User, settings: Any, no_isolation: None, staff_session: Any
) -> None:
    submission, job = _grade(user, GOOD)

    assert submission.status == SubmissionStatus.FAILED
    assert "grades nothing without isolation" in submission.status_reason
    assert job.logs == ""
    body = staff_session.get("/healthz").json()
    assert body["status"] == "degraded"
    assert body["grader"]["isolation"] == "none"
    assert body["grader"]["grading"] == "refused"


@pytest.mark.parametrize("switch", ["DEBUG", "GRADING_ALLOW_UNSANDBOXED"])
def test_unsandboxed_grading_only_when_asked_and_loudly(
    user: User, settings: Any, no_isolation: None, switch: str, staff_session: Any
) -> None:
    setattr(settings, switch, True)
    submission, job = _grade(user, GOOD)

    assert submission.status == SubmissionStatus.COMPLETED
    assert job.logs.startswith("[yoyaku] WARNING: graded WITHOUT isolation.")
    grader = staff_session.get("/healthz").json()["grader"]
    assert grader["isolation"] == "none"
    assert "warning" in grader


def test_healthz_reports_isolation_and_limits(staff_session: Any, settings: Any) -> None:
    body = staff_session.get("/healthz").json()

    assert body["grader"]["isolation"] == "bubblewrap"
    assert body["grader"]["limits"]["memory_bytes"] == settings.GRADING_MEMORY_LIMIT
    assert body["grader"]["limits"]["scratch_bytes"] == settings.GRADING_SCRATCH_SIZE
    assert body["grader"]["limits"]["processes"] == settings.GRADING_MAX_PROCESSES
    assert "processes" in body["grader"]["enforced_by"]


def test_a_worker_logs_an_error_at_start_when_it_cannot_isolate(
    settings: Any, no_isolation: None, caplog: pytest.LogCaptureFixture
) -> None:
    from django_q.signals import post_spawn

    post_spawn.send(sender="django_q", proc_name="Worker-1")

    assert any(
        r.levelname == "ERROR" and "gradings will FAIL" in r.getMessage() for r in caplog.records
    )


@pytest.mark.parametrize("count", [3, 200], ids=["as-descriptors", "copied-by-the-runner"])
def test_every_file_reaches_the_working_folder(user: User, count: int) -> None:
    """Few files are written into the sandbox by bubblewrap, many are copied by its runner."""
    archive = zip_bytes({f"data/{i:03d}.txt": str(i).encode() for i in range(count)})
    program = (
        "import json, os\n"
        "total = sum(int(open('data/' + n).read()) for n in os.listdir('data'))\n"
        "json.dump({'score': total}, open('metrics.json', 'w'))\n"
    )
    submission, job = _grade(user, program, extra_files={"data.zip": archive})

    assert submission.status == SubmissionStatus.COMPLETED, job.logs
    assert submission.score == sum(range(count))


def test_files_larger_than_the_scratch_fail_with_reason(user: User, settings: Any) -> None:
    settings.GRADING_SCRATCH_SIZE = 64 * 1024
    submission, _ = _grade(user, GOOD, extra_files={"blob.yaml": b"x" * 100_000})

    assert submission.status == SubmissionStatus.FAILED
    assert "do not fit in the sandbox" in submission.status_reason
