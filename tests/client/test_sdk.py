"""The Python SDK (`yoyaku_client.Client`) against a live server on loopback: a typed method
for every operation, typed errors with the server's code, the one retry loop."""

from __future__ import annotations

import datetime as dt
import hashlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.http import HttpRequest

from apps.jobs.models import Job
from apps.jobs.services import idempotency_claim, idempotency_fingerprint
from tests import faults
from tests.client.conftest import HELLO_CONFIG, HELLO_MAIN, ROOT, set_quota, token_for, write_files
from tests.factories.users import make_user
from yoyaku_client import (
    Action,
    AuthenticationError,
    Client,
    ConflictError,
    IdempotencyKeyReused,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    QuotaError,
    RetryEvent,
    RetryPolicy,
    TransportError,
)
from yoyaku_client.client import UPLOAD_KEY_FIELD
from yoyaku_client.models import to_jsonable

FAST = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.05)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    folder = write_files(
        tmp_path / "src",
        {"main.py": HELLO_MAIN, "config.yaml": HELLO_CONFIG, "helper.py": "VALUE = 1\n"},
    )
    return {p.name: p for p in folder.iterdir()}


@pytest.fixture
def sdk(live_server: Any, researcher: User) -> Any:
    with Client(live_server.url, token_for(researcher), retry=FAST) as client:
        yield client


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- the retry policy (pure) ---------------------------------------------------------------------


def test_backoff_grows_exponentially_with_full_jitter_and_a_cap() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=8.0, jitter=1.0)
    for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 8.0)]:
        delays = [policy.delay(attempt) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling * 0.5  # spread over the range, not a constant
    no_jitter = RetryPolicy(base_delay=0.5, max_delay=8.0, jitter=0.0)
    assert [no_jitter.delay(n) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    # The server's Retry-After wins when longer, within the cap.
    assert no_jitter.delay(1, retry_after=3.0) == 3.0
    assert no_jitter.delay(1, retry_after=60.0) == 8.0
    assert RetryPolicy.none().max_attempts == 1


# --- every operation -----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_submission_file_and_job_operations(sdk: Client, files: dict[str, Path]) -> None:
    me = sdk.me()
    assert me.username == "researcher"

    progress: list[tuple[int, int]] = []
    submission = sdk.create_submission(
        [files["main.py"]],
        metadata={"method": "padim"},
        question_id="q1",
        skill="s1",
        sha256=_sha(files["main.py"]),
        upload_key="my-upload",
        progress=lambda sent, total: progress.append((sent, total)),
    )
    assert submission.status == "draft"
    assert submission.metadata == {"method": "padim", UPLOAD_KEY_FIELD: "my-upload"}
    assert [f.filename for f in submission.files] == ["main.py"]
    assert progress[0][0] == 0
    assert progress[-1][0] == progress[-1][1]  # the whole body was reported

    first = sdk.upload_file(
        submission.submission_id, files["config.yaml"], sha256=_sha(files["config.yaml"])
    )
    assert (first.created, first.sha256) == (True, _sha(files["config.yaml"]))
    again = sdk.upload_file(submission.submission_id, files["config.yaml"])
    assert again.created is False  # same name, same content: the server's 200
    assert [f.filename for f in sdk.list_files(submission.submission_id)] == [
        "main.py",
        "config.yaml",
    ]
    with pytest.raises(InvalidRequest) as bad:
        sdk.upload_file(submission.submission_id, files["helper.py"], sha256="0" * 64)
    assert bad.value.code == "checksum_mismatch"

    assert sdk.get_submission(submission.submission_id).files[1].filename == "config.yaml"
    page = sdk.list_submissions(limit=1)
    assert (page.count, page.next_offset) == (1, None)
    assert [s.submission_id for s in sdk.find_submissions(upload_key="my-upload")] == [
        submission.submission_id
    ]

    job = sdk.submit_job(
        submission.submission_id, config={"resource_class": "small"}, idempotency_key="k-1"
    )
    assert (job.status, job.idempotent_hit, job.attempts) == ("queued", False, 1)
    replay = sdk.submit_job(
        submission.submission_id, config={"resource_class": "small"}, idempotency_key="k-1"
    )
    assert (replay.job_id, replay.idempotent_hit) == (job.job_id, True)
    with pytest.raises(IdempotencyKeyReused) as reused:
        sdk.submit_job(submission.submission_id, idempotency_key="k-1")
    assert reused.value.status == 422

    assert [j.job_id for j in sdk.list_jobs()] == [job.job_id]
    assert sdk.list_jobs(status="running") == []
    detail = sdk.get_job(job.job_id)
    assert (detail.resource_class, detail.cost, detail.finished) == ("small", 1.0, False)
    assert sdk.job_logs(job.job_id).logs == ""
    assert sdk.cancel_job(job.job_id).status == "cancelled"
    assert sdk.wait_for_job(job.job_id, timeout=5).status == "cancelled"

    with pytest.raises(ConflictError) as sealed:
        sdk.upload_file(submission.submission_id, files["helper.py"])
    assert sealed.value.code == "submission_sealed"


@pytest.mark.django_db(transaction=True)
def test_quota_and_reservation_operations(sdk: Client, researcher: User) -> None:
    quota = sdk.quota()
    assert (quota.max_concurrent_jobs, quota.available_slots) == (5, 5)
    reservation = sdk.reserve(ttl_seconds=60)
    assert reservation.state == "active"
    extended = sdk.extend_reservation(reservation.reservation_id, ttl_seconds=600)
    assert extended.expires_at is not None
    assert reservation.expires_at is not None
    assert extended.expires_at > reservation.expires_at
    assert [r.reservation_id for r in sdk.list_reservations()] == [reservation.reservation_id]
    assert sdk.quota().active_reservations == 1
    assert sdk.release_reservation(reservation.reservation_id).state == "released"
    assert sdk.release_reservation(reservation.reservation_id).state == "released"
    with pytest.raises(ConflictError) as inactive:
        sdk.extend_reservation(reservation.reservation_id)
    assert inactive.value.code == "reservation_not_active"

    set_quota(researcher, max_concurrent_jobs=0, max_jobs_per_day=0)
    with pytest.raises(QuotaError) as full:
        sdk.reserve()
    assert (full.value.status, full.value.code) == (429, "quota_exceeded")
    assert "Maximum 0 concurrent jobs" in full.value.error


@pytest.mark.django_db(transaction=True)
def test_rate_limit_is_a_quota_error_with_retry_after(
    sdk: Client, researcher: User, files: dict[str, Path]
) -> None:
    submission = sdk.create_submission([files["main.py"]])
    sdk.upload_file(submission.submission_id, files["config.yaml"])
    set_quota(researcher, max_jobs_per_day=0)
    with pytest.raises(QuotaError) as limited:
        sdk.submit_job(submission.submission_id)
    assert limited.value.code == "rate_limited"
    assert limited.value.retry_after is not None


@pytest.mark.django_db(transaction=True)
def test_review_leaderboard_and_schedule_operations(
    live_server: Any, sdk: Client, researcher: User, files: dict[str, Path]
) -> None:
    from apps.submissions.models import Submission

    submission = sdk.create_submission([files["main.py"]])
    sdk.upload_file(submission.submission_id, files["config.yaml"])
    Submission.objects.filter(pk=submission.submission_id).update(
        status="review_pending", score=0.4
    )

    reviewer = Client(
        live_server.url, token_for(make_user(username="rita", reviewer=True)), retry=FAST
    )
    with reviewer:
        [entry] = reviewer.review_queue()
        assert (entry.submission_id, entry.owner and entry.owner.username) == (
            submission.submission_id,
            "researcher",
        )
        claim = reviewer.claim_review(submission.submission_id)
        assert claim.claimed_by is not None
        assert claim.claimed_by.username == "rita"
        assert reviewer.extend_review_claim(submission.submission_id).claim_expires_at is not None
        assert reviewer.release_review_claim(submission.submission_id).released is True
        reviewer.claim_review(submission.submission_id)
        outcome = reviewer.complete_review(submission.submission_id, verdict="approve", score=0.9)
        assert (outcome.status, outcome.score, outcome.review.verdict) == (
            "completed",
            0.9,
            "approve",
        )
    with pytest.raises(PermissionDenied):
        sdk.review_queue()

    anonymous = Client(live_server.url, None, retry=FAST)
    with anonymous:
        [row] = anonymous.leaderboard()
        assert (row.rank, row.user.username, row.score) == (1, "researcher", 0.9)
        with pytest.raises(AuthenticationError):
            anonymous.me()

    staff = Client(
        live_server.url, token_for(make_user(username="boss", is_staff=True)), retry=FAST
    )
    with staff:
        regrade = staff.regrade(submission.submission_id)
        assert regrade.status == "pending"
        task = staff.create_task("quota.boost", {"concurrent": 1})
        assert task.topic == "quota.boost"

    soon = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    point = sdk.book_point(at=soon, action=Action(path="/api/me/", method="GET"), resource_id="r1")
    assert (point.schedule_type, point.state) == ("point", "Inexistent")
    again = sdk.book_schedule(
        {
            "life_uuid": point.life_uuid,
            "schedule_type": "point",
            "resource_id": "r1",
            "term": {"birth_time": soon.isoformat()},
            "birth": {"path": "/api/me/", "method": "GET"},
        }
    )
    assert again.life_uuid == point.life_uuid  # the same booking again: the same Life
    term = sdk.book_term(
        birth_time="2030-01-01 10:00:00",
        death_time="2030-01-01 12:00:00",
        birth=Action(path="/api/me/", method="GET", retry_count=1),
        death=Action(path="/api/me/", method="GET"),
    )
    moved = sdk.change_schedule(term.life_uuid, death_time="2030-01-01 13:00:00")
    assert moved.death_time == dt.datetime(2030, 1, 1, 13, tzinfo=dt.UTC)
    assert {x.life_uuid for x in sdk.list_schedules()} == {point.life_uuid, term.life_uuid}
    assert [x.life_uuid for x in sdk.list_schedules(schedule_type="term")] == [term.life_uuid]
    assert len(sdk.get_schedule(term.life_uuid).plans) == 2
    assert sdk.cancel_schedule(point.life_uuid).state == "Stillbirth"
    with pytest.raises(NotFound):
        sdk.get_schedule("0" * 32)
    with pytest.raises(InvalidRequest) as invalid:
        sdk.book_schedule({"schedule_type": "nonsense"})
    assert invalid.value.code == "invalid_schedule"
    assert "schedule_type" in invalid.value.fields
    assert to_jsonable(term)["birth_time"].startswith("2030-01-01T10:00:00")


# --- retries -------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_key_in_use_is_retried_with_the_same_key_until_the_claim_is_taken_over(
    sdk: Client, researcher: User, files: dict[str, Path], settings: Any
) -> None:
    settings.IDEMPOTENCY_LOCK_TIMEOUT = 2
    submission = sdk.create_submission([files["main.py"]])
    sdk.upload_file(submission.submission_id, files["config.yaml"])
    # Another request holds the key (and died): the server answers 409 in progress.
    idempotency_claim(
        user=researcher,
        key="busy-key",
        fingerprint=idempotency_fingerprint(
            submission_id=submission.submission_id, config={}, reservation_id=None
        ),
        ttl_hours=24,
    )
    events: list[RetryEvent] = []
    sdk.transport.on_retry = events.append
    sdk.transport.retry = RetryPolicy(max_attempts=2, base_delay=0.01, in_progress_timeout=30)

    job = sdk.submit_job(submission.submission_id, config={}, idempotency_key="busy-key")

    assert job.status == "queued"
    assert job.attempts >= 2
    assert events
    assert all(e.reason == "409 idempotency_request_in_progress" for e in events)
    assert Job.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_503_retried_then_4xx_never(sdk: Client, files: dict[str, Path]) -> None:
    seen: list[str] = []

    def count(request: HttpRequest) -> bool:
        seen.append(request.path)
        return False

    submission = sdk.create_submission([files["main.py"]])
    faults.fail_next(lambda r: r.path.endswith("/files/") and r.method == "POST", times=3)
    events: list[RetryEvent] = []
    sdk.transport.on_retry = events.append
    uploaded = sdk.upload_file(submission.submission_id, files["config.yaml"])
    assert uploaded.created is True
    assert [e.reason for e in events] == ["503 unavailable"] * 3

    faults.clear()
    faults.fail_next(count, times=1)
    events.clear()
    bad = files["helper.py"].with_name("tool.exe")
    bad.write_text("MZ")
    with pytest.raises(InvalidRequest) as refused:
        sdk.upload_file(submission.submission_id, bad)
    assert refused.value.code == "invalid_extension"
    assert events == []
    assert seen == [f"/api/submissions/{submission.submission_id}/files/"]


def test_unreachable_server_is_a_transport_error_after_the_policy(tmp_path: Path) -> None:
    import socket

    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]
    events: list[RetryEvent] = []
    client = Client(f"http://127.0.0.1:{port}", "t", retry=FAST, on_retry=events.append)
    with client, pytest.raises(TransportError) as failed:
        client.me()
    assert (failed.value.attempts, failed.value.sent) == (4, False)
    assert len(events) == 3


# --- packaging -----------------------------------------------------------------------------------


def test_the_package_imports_without_django() -> None:
    code = (
        "import sys, yoyaku_client, yoyaku_client.cli\n"
        "roots = {'django', 'rest_framework', 'apps'}\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in roots)\n"
        "assert not bad, bad\n"
        "print(yoyaku_client.__version__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0.1.0"


def test_the_package_leaves_httpx_command_line_unimported_yet_importable() -> None:
    # httpx imports its own command line (pygments, rich's syntax highlighting) unless told
    # not to: the client's start-up skips it, and a program importing it later still can.
    code = (
        "import sys, yoyaku_client.cli\n"
        "assert 'pygments' not in sys.modules and 'httpx._main' not in sys.modules\n"
        "import httpx._main\n"
        "print(httpx._main.__name__, 'pygments' in sys.modules)\n"
    )
    # Not isolated (-I): the client under test is the one PYTHONPATH names, if any.
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["httpx._main", "True"]


@pytest.mark.slow
def test_the_client_builds_as_its_own_wheel_with_every_module_and_the_console_script(
    tmp_path: Path,
) -> None:
    # Build from a copy: setuptools writes build/ and *.egg-info beside the sources.
    source = tmp_path / "client"
    shutil.copytree(
        ROOT / "client", source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    wheels = tmp_path / "wheels"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--wheel-dir",
            str(wheels),
            str(source),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    [wheel] = wheels.glob("yoyaku_client-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        assert "yoyaku = yoyaku_client.cli:main" in archive.read(entry_points).decode()
        metadata = archive.read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "yoyaku_client/py.typed" in names
    sources = {
        path.relative_to(ROOT / "client").as_posix()
        for path in (ROOT / "client" / "yoyaku_client").rglob("*.py")
    }
    assert sources <= set(names), sorted(sources - set(names))
    for pin in ("httpx==0.28.1", "click==8.5.1", "rich==15.0.0"):
        assert f"Requires-Dist: {pin}" in metadata
    pinned = (ROOT / "requirements" / "client.txt").read_text()
    assert all(pin in pinned for pin in ("httpx==0.28.1", "click==8.5.1", "rich==15.0.0"))
