"""The client under faults, on loopback: lost answers (a real TCP proxy that drops the
connection after the server answered), injected 503s, refusals that must stop at once, and
quota limits that must never be retried. Requests are counted at the proxy."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.http import HttpRequest

from apps.jobs.models import Job
from apps.quotas.models import Reservation
from apps.submissions.models import Submission, SubmissionFile
from tests import faults
from tests.client.conftest import HELLO_CONFIG, HELLO_MAIN, Cli, set_quota, write_files
from tests.client.proxy import FaultProxy

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

FILES_PATH = r"^/api/submissions/[0-9a-f]{32}/files/$"
CREATE_PATH = r"^/api/submissions/$"
JOBS_PATH = r"^/api/jobs/$"
RESERVE_PATH = r"^/api/quotas/reservations/$"


@pytest.fixture
def program(tmp_path: Path) -> Path:
    # Sorted: config.yaml (creates the draft), then helper.py and main.py at once (one
    # request each).
    return write_files(
        tmp_path / "program",
        {"main.py": HELLO_MAIN, "config.yaml": HELLO_CONFIG, "helper.py": "VALUE = 42\n"},
    )


def _stored(submission: Submission) -> list[str]:
    return sorted(
        SubmissionFile.objects.filter(submission=submission).values_list("filename", flat=True)
    )


def test_lost_answers_of_an_upload_and_of_the_job_creation_make_one_file_and_one_job(
    cli: Cli, proxy: FaultProxy, program: Path
) -> None:
    proxy.drop_answer("POST", FILES_PATH)  # helper.py or main.py: stored, answer lost
    proxy.drop_answer("POST", JOBS_PATH)  # the job: created, answer lost

    result = cli.via(proxy.url).run("submit", str(program), "--json")

    assert result.code == 0, result.stderr
    body = result.json()
    assert "retrying POST /api/submissions/" in result.stderr
    assert "retrying POST /api/jobs/" in result.stderr
    assert "duplicate_filename" not in result.stderr
    # Each lost answer cost exactly one more request.
    assert proxy.count("POST", FILES_PATH) == 3
    assert proxy.count("POST", JOBS_PATH) == 2
    submission = Submission.objects.get()
    assert _stored(submission) == ["config.yaml", "helper.py", "main.py"]
    job = Job.objects.get()
    assert body["job_id"] == job.pk
    assert body["submission_id"] == submission.pk
    # The retry found what the first attempt did: the stored file (200), the job (replay).
    actions = {f["filename"]: f["action"] for f in body["files"]}
    assert actions.pop("config.yaml") == "uploaded"
    assert sorted(actions.values()) == ["replayed", "uploaded"]
    assert body["idempotent_hit"] is True
    assert body["matched_existing"] is False


def test_a_lost_answer_of_the_draft_creation_finds_the_draft_instead_of_making_another(
    cli: Cli, proxy: FaultProxy, program: Path
) -> None:
    proxy.drop_answer("POST", CREATE_PATH)

    body = cli.via(proxy.url).json("submit", str(program))

    assert proxy.count("POST", CREATE_PATH) == 1  # found by its upload key, not sent again
    assert proxy.count("GET", CREATE_PATH) >= 1
    submission = Submission.objects.get()
    assert body["submission_id"] == submission.pk
    assert _stored(submission) == ["config.yaml", "helper.py", "main.py"]
    assert Job.objects.count() == 1


def test_a_lost_answer_of_a_reservation_is_not_sent_again(
    cli: Cli, proxy: FaultProxy, researcher: User
) -> None:
    proxy.drop_answer("POST", RESERVE_PATH)

    result = cli.via(proxy.url).run("reserve", "--json")

    assert result.code == 1
    assert result.json()["code"] == "ambiguous"
    assert "may have taken effect" in result.stderr
    assert proxy.count("POST", RESERVE_PATH) == 1
    assert Reservation.objects.count() == 1


def test_injected_503s_on_uploads_are_retried_then_succeed(
    cli: Cli, proxy: FaultProxy, program: Path
) -> None:
    def helper_upload(request: HttpRequest) -> bool:
        return request.method == "POST" and request.path.endswith("/files/")

    faults.fail_next(helper_upload, times=2)

    body = cli.via(proxy.url).json("submit", str(program))

    # helper.py: two 503s then 201; main.py: 201.
    assert proxy.count("POST", FILES_PATH) == 4
    submission = Submission.objects.get()
    assert _stored(submission) == ["config.yaml", "helper.py", "main.py"]
    assert Job.objects.get().pk == body["job_id"]


def test_503s_past_the_retry_budget_stop_with_the_servers_message(
    cli: Cli, proxy: FaultProxy, program: Path
) -> None:
    faults.fail_next(lambda r: r.path.endswith("/files/"), times=100)

    result = cli.via(proxy.url).run("submit", str(program), "--json", YOYAKU_RETRIES="2")

    assert result.code == 1
    assert result.json()["code"] == "unavailable"
    assert "Injected fault" in result.stderr
    # helper.py and main.py were under way together: the first to give up tried 1 + 2 times;
    # the other, at most as many, was not sent again once it had.
    forwarded = [f for f in proxy.forwarded if re.search(FILES_PATH, f[1])]
    assert 3 + 1 <= len(forwarded) <= 2 * 3
    assert Job.objects.count() == 0


def test_a_400_stops_at_once_with_the_servers_message_and_releases_the_slot(
    cli: Cli, proxy: FaultProxy, tmp_path: Path
) -> None:
    folder = write_files(
        tmp_path / "exe", {"main.py": HELLO_MAIN, "tool.exe": "MZ", "config.yaml": HELLO_CONFIG}
    )
    result = cli.via(proxy.url).run(
        "submit",
        str(folder / "main.py"),
        str(folder / "tool.exe"),
        str(folder / "config.yaml"),
        "--reserve",
        "--skip-local-checks",
        "--json",
    )

    assert result.code == 1
    body = result.json()
    assert (body["status"], body["code"]) == (400, "invalid_extension")
    assert "tool.exe" in result.stderr
    assert "retrying" not in result.stderr
    # tool.exe once (refused, never retried); config.yaml was under way beside it and landed.
    assert proxy.count("POST", FILES_PATH) == 2
    assert _stored(Submission.objects.get()) == ["config.yaml", "main.py"]
    assert Job.objects.count() == 0
    assert Reservation.objects.get().released_at is not None


def test_quota_full_exits_4_without_a_retry(
    cli: Cli, proxy: FaultProxy, program: Path, researcher: User, tmp_path: Path
) -> None:
    set_quota(researcher, max_concurrent_jobs=1)
    first = cli.json("submit", str(program))  # takes the only slot (no worker: stays queued)
    other = write_files(tmp_path / "other", {"main.py": "x = 2\n", "config.yaml": "b: 2\n"})

    result = cli.via(proxy.url).run("submit", str(other), "--json")

    assert result.code == 4
    body = result.json()
    assert (body["status"], body["code"]) == (429, "quota_exceeded")
    assert "Quota exceeded: Maximum 1 concurrent jobs allowed" in result.stderr
    assert proxy.count("POST", JOBS_PATH) == 1
    assert [j.pk for j in Job.objects.all()] == [first["job_id"]]

    # With --reserve the refusal comes first, before any upload.
    result = cli.via(proxy.url).run("submit", str(other), "--reserve", "--json")
    assert result.code == 4
    assert result.json()["code"] == "quota_exceeded"
    assert proxy.count("POST", RESERVE_PATH) == 1
    assert proxy.count("POST", JOBS_PATH) == 1
    assert proxy.count("POST", FILES_PATH) == proxy.count("POST", CREATE_PATH) == 1

    assert cli.via(proxy.url).run("reserve").code == 4
    assert proxy.count("POST", RESERVE_PATH) == 2


def test_cost_limit_exits_4_without_a_retry(
    cli: Cli, proxy: FaultProxy, program: Path, researcher: User
) -> None:
    set_quota(researcher, monthly_cost_limit=1)

    result = cli.via(proxy.url).run("submit", str(program), "--resource-class", "large", "--json")

    assert result.code == 4
    assert result.json()["code"] == "cost_limit_exceeded"
    assert "Cost limit" in result.stderr
    assert proxy.count("POST", JOBS_PATH) == 1
    assert Job.objects.count() == 0


def test_quota_warnings_are_printed(cli: Cli, program: Path, researcher: User) -> None:
    set_quota(researcher, max_concurrent_jobs=1, monthly_cost_limit=2)

    result = cli.run("submit", str(program), "--json")

    assert result.code == 0
    body = result.json()
    assert body["quota_warnings"]
    assert body["cost_limit_warning"]
    assert "Warning:" in result.stderr


def test_an_unreachable_server_is_retried_then_reported(cli: Cli, tmp_path: Path) -> None:
    import socket

    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]  # closed when the block ends: nothing listens there
    result = cli.via(f"http://127.0.0.1:{port}").run("jobs", "--json", YOYAKU_RETRIES="2")
    assert result.code == 1
    body = result.json()
    assert (body["code"], body["attempts"]) == ("unreachable", 3)
    assert result.stderr.count("retrying GET /api/jobs/") == 2
