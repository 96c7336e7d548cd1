"""Every `yoyaku` command end to end: the installed console script in a subprocess, against a
live server on loopback, with `--json` parsed here (SPEC §10 names and exit codes)."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from apps.jobs.models import Job
from apps.quotas.models import Reservation
from apps.schedule.models import Life
from apps.submissions.models import Submission, SubmissionFile
from tests.client.conftest import EXAMPLES, Cli, token_for, write_files
from tests.factories.users import make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

COMMANDS = [
    "login",
    "whoami",
    "submit",
    "jobs",
    "job",
    "logs",
    "cancel",
    "quota",
    "reserve",
    "release",
    "leaderboard",
    "review",
    "schedule",
    "token",
]


def test_help_lists_every_command_of_the_contract_and_the_exit_codes(cli: Cli) -> None:
    result = cli.run("--help")
    assert result.code == 0
    for name in COMMANDS:
        assert f"  {name} " in result.stdout, name
    for line in ("0  success", "2  usage", "3  the job failed", "4  quota", "5  --wait"):
        assert line in result.stdout


@pytest.mark.parametrize(
    "command",
    [
        *[[c] for c in COMMANDS if c not in ("review", "schedule", "token")],
        ["review", "queue"],
        ["review", "claim"],
        ["review", "complete"],
        ["schedule", "book"],
        ["schedule", "list"],
        ["schedule", "show"],
        ["schedule", "cancel"],
        ["token", "list"],
        ["token", "create"],
        ["token", "revoke"],
    ],
)
def test_every_command_has_help_with_an_example_and_json(cli: Cli, command: list[str]) -> None:
    result = cli.run(*command, "--help")
    assert result.code == 0, result.stderr
    assert "Example" in result.stdout
    assert "--json" in result.stdout


def test_usage_errors_exit_2(cli: Cli) -> None:
    assert cli.run("jobs", "--status", "bogus").code == 2
    assert cli.run("submit").code == 2
    assert cli.run("no-such-command").code == 2
    assert cli.run("review", "complete", "x" * 32).code == 2  # neither --approve nor --reject


def test_login_writes_a_private_config_file_and_whoami_reads_it(
    cli: Cli, researcher: User, tmp_path: Path
) -> None:
    anonymous = cli.as_user(None)
    config = tmp_path / "yoyaku-config" / "config.json"
    data = anonymous.json("login", "--url", cli.url, "--token", cli.token or "", YOYAKU_URL="")
    assert data["user"]["username"] == "researcher"
    assert data["config_file"] == str(config)
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.parent.stat().st_mode) == 0o700

    # No environment: the file is used.
    me = anonymous.json("whoami", YOYAKU_URL="")
    assert me["user"] == {
        "id": researcher.pk,
        "username": "researcher",
        "is_staff": False,
        "is_reviewer": False,
    }
    assert (me["url_source"], me["token_source"]) == ("file", "file")

    # YOYAKU_TOKEN overrides the file.
    other = make_user(username="other")
    me = anonymous.json("whoami", YOYAKU_URL="", YOYAKU_TOKEN=token_for(other))
    assert me["user"]["username"] == "other"
    assert me["token_source"] == "env"


def test_login_with_a_wrong_token_saves_nothing(cli: Cli, tmp_path: Path) -> None:
    result = cli.as_user(None).run("login", "--url", cli.url, "--token", "nope", "--json")
    assert result.code == 1
    assert result.json()["code"] == "authentication_failed"
    assert not (tmp_path / "yoyaku-config" / "config.json").exists()


def test_not_logged_in_is_an_error(cli: Cli) -> None:
    result = cli.as_user(None).run("jobs")
    assert result.code == 1
    assert "not logged in" in result.stderr


def test_submit_wait_jobs_job_logs_quota_and_leaderboard(
    cli: Cli, researcher: User, grading: Any, tmp_path: Path
) -> None:
    submitted = cli.json(
        "submit",
        str(EXAMPLES / "hello"),
        "--question",
        "q1",
        "--skill",
        "reading",
        "--wait",
        "--timeout",
        "120",
    )
    assert submitted["status"] == "completed"
    assert submitted["score"] == 1.0
    assert submitted["submission_status"] == "completed"
    assert submitted["idempotent_hit"] is False
    assert {f["filename"]: f["action"] for f in submitted["files"]} == {
        "main.py": "uploaded",
        "config.yaml": "uploaded",
    }
    job_id = submitted["job_id"]
    assert Job.objects.get().pk == job_id

    jobs = cli.json("jobs")
    assert [j["job_id"] for j in jobs] == [job_id]
    assert cli.json("jobs", "--status", "queued") == []

    job = cli.json("job", job_id)
    assert job["status"] == "completed"
    assert job["submission_id"] == submitted["submission_id"]

    logs = cli.json("logs", job_id)
    assert "3/3 correct" in logs["logs"]
    plain = cli.run("logs", job_id)
    assert plain.code == 0
    assert "hello from hello: 3/3 correct" in plain.stdout

    quota = cli.json("quota")
    assert quota["max_concurrent_jobs"] == 5
    assert quota["active_jobs"] == 0
    assert quota["jobs_last_24h"] == 1
    assert quota["reservations"] == []

    board = cli.json("leaderboard", "--question", "q1", "--skill", "reading")
    assert [(r["rank"], r["user"]["username"], r["score"]) for r in board] == [
        (1, "researcher", 1.0)
    ]
    # Public: no token needed.
    assert cli.as_user(None).json("leaderboard", "--question", "q1", "--skill", "reading") == board
    assert cli.as_user(None).json("leaderboard") == [
        {"question_id": "q1", "skills": ["reading"], "users": 1, "best_score": 1.0, "rows": board}
    ]


def test_logs_follow_prints_until_the_job_ends(cli: Cli, grading: Any) -> None:
    submitted = cli.json("submit", str(EXAMPLES / "hello"))
    process = cli.popen("logs", submitted["job_id"], "--follow", "--interval", "0.2")
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert "hello from hello: 3/3 correct" in out
    assert "completed" in err


def test_logs_follow_json_lines_and_failed_job_exit_3(
    cli: Cli, grading: Any, tmp_path: Path
) -> None:
    folder = write_files(
        tmp_path / "crash",
        {"main.py": "print('about to fail')\nraise SystemExit(2)\n", "config.yaml": "a: 1\n"},
    )
    result = cli.run("submit", str(folder), "--wait", "--timeout", "120", "--json")
    assert result.code == 3, result.stderr
    assert result.json()["status"] == "failed"
    job_id = result.json()["job_id"]
    follow = cli.run("logs", job_id, "--follow", "--json")
    assert follow.code == 3
    lines = [line for line in follow.stdout.splitlines() if line]
    events = [json.loads(line) for line in lines]
    assert events[-1]["status"] == "failed"
    assert "about to fail" in "".join(e["logs"] for e in events)
    assert cli.run("job", job_id, "--wait").code == 3


def test_job_wait_timeout_exits_5_and_cancel(cli: Cli) -> None:
    submitted = cli.json("submit", str(EXAMPLES / "hello"))  # no worker: it stays queued
    job_id = submitted["job_id"]
    started = time.monotonic()
    result = cli.run("job", job_id, "--wait", "--timeout", "1", "--json")
    assert result.code == 5
    assert time.monotonic() - started < 30
    assert result.json()["status"] == "queued"
    waited = cli.run("submit", str(EXAMPLES / "hello"), "--wait", "--timeout", "0.5")
    assert waited.code == 5  # the same job (same key), still queued

    cancelled = cli.json("cancel", job_id)
    assert cancelled["status"] == "cancelled"
    assert cli.json("cancel", job_id)["status"] == "cancelled"  # again: fine
    assert cli.run("job", job_id, "--wait").code == 3


def test_reserve_and_release(cli: Cli, researcher: User) -> None:
    reservation = cli.json("reserve", "--ttl", "120")
    assert reservation["state"] == "active"
    quota = cli.json("quota")
    assert quota["active_reservations"] == 1
    assert [r["reservation_id"] for r in quota["reservations"]] == [reservation["reservation_id"]]
    released = cli.json("release", reservation["reservation_id"])
    assert released["state"] == "released"
    assert Reservation.objects.get().released_at is not None
    assert cli.json("release", reservation["reservation_id"])["state"] == "released"
    assert cli.run("reserve", "--ttl", "5").code == 2  # below the API's minimum of 10


def test_errors_carry_the_servers_code_and_message(cli: Cli, researcher: User) -> None:
    result = cli.run("job", "f" * 32, "--json")
    assert result.code == 1
    body = result.json()
    assert (body["success"], body["status"], body["code"]) == (False, 404, "not_found")
    assert "not_found" in result.stderr

    other = make_user(username="someone")
    foreign = cli.as_user(token_for(other)).json("reserve")
    result = cli.run("release", foreign["reservation_id"], "--json")
    assert result.code == 1
    assert result.json()["code"] == "permission_denied"


def test_review_queue_claim_complete_and_regrade(cli: Cli, researcher: User, grading: Any) -> None:
    submitted = cli.json("submit", str(EXAMPLES / "needs-review"), "--wait", "--timeout", "120")
    assert submitted["status"] == "completed"
    assert submitted["submission_status"] == "review_pending"
    submission_id = submitted["submission_id"]

    reviewer = cli.as_user(token_for(make_user(username="rita", reviewer=True)))
    queue = reviewer.json("review", "queue")
    assert [(r["submission_id"], r["owner"]["username"]) for r in queue] == [
        (submission_id, "researcher")
    ]
    assert queue[0]["claimed_by"] is None

    claim = reviewer.json("review", "claim", submission_id)
    assert claim["claimed_by"]["username"] == "rita"
    assert reviewer.json("review", "extend", submission_id)["submission_id"] == submission_id
    assert reviewer.json("review", "release", submission_id)["released"] is True
    reviewer.json("review", "claim", submission_id)

    # The owner is not a reviewer: 403.
    refused = cli.run("review", "queue", "--json")
    assert refused.code == 1
    assert refused.json()["code"] == "permission_denied"

    done = reviewer.json(
        "review", "complete", submission_id, "--approve", "--score", "0.75", "--comment", "ok"
    )
    assert (done["status"], done["score"]) == ("completed", 0.75)
    assert done["review"]["verdict"] == "approve"
    again = reviewer.run("review", "complete", submission_id, "--reject", "--json")
    assert again.code == 1
    assert again.json()["code"] == "invalid_transition"

    staff = cli.as_user(token_for(make_user(username="boss", is_staff=True, is_superuser=True)))
    regraded = staff.json("review", "regrade", submission_id)
    assert regraded["status"] == "pending"
    assert Job.objects.filter(submission_id=submission_id).count() == 2


def test_schedule_book_list_show_cancel(cli: Cli, researcher: User) -> None:
    point = cli.json(
        "schedule",
        "book",
        "--at",
        "+2h",
        "--path",
        "/api/me/",
        "--method",
        "GET",
        "--resource",
        "gpu-1",
    )
    assert point["schedule_type"] == "point"
    assert point["state"] == "Inexistent"
    assert [p["kind"] for p in point["plans"]] == ["birth"]

    term = cli.json(
        "schedule",
        "book",
        "--birth",
        "2030-01-01 10:00:00",
        "--death",
        "2030-01-01 12:00:00",
        "--path",
        "/api/me/",
        "--method",
        "GET",
        "--death-path",
        "/api/me/",
        "--death-method",
        "GET",
        "--retry-count",
        "2",
    )
    assert term["schedule_type"] == "term"
    assert term["birth_time"].startswith("2030-01-01T10:00:00")
    assert sorted(p["kind"] for p in term["plans"]) == ["birth", "death"]

    # A staff-only topic is refused to a plain user, with the server's code (exit 1).
    boost = cli.run(
        "schedule", "book", "--at", "+3h", "--path", "/api/schedule/tasks/",
        "--body", '{"topic": "quota.boost", "content": {"concurrent": 1}}', "--json",
    )  # fmt: skip
    assert boost.code == 1
    assert boost.json()["code"] == "permission_denied"

    # The resource guard: a second booking of gpu-1 near the first is refused (409).
    clash = cli.run(
        "schedule", "book", "--at", "+2h", "--path", "/api/me/", "--method", "GET",
        "--resource", "gpu-1", "--json",
    )  # fmt: skip
    assert clash.code == 1
    assert clash.json()["code"] == "resource_conflict"
    too_late = cli.run("schedule", "book", "--at", "+1s", "--path", "/api/me/", "--json")
    assert too_late.code == 1
    assert too_late.json()["code"] == "too_late"

    listed = cli.json("schedule", "list")
    assert {x["life_uuid"] for x in listed} == {point["life_uuid"], term["life_uuid"]}
    assert [x["life_uuid"] for x in cli.json("schedule", "list", "--type", "term")] == [
        term["life_uuid"]
    ]
    shown = cli.json("schedule", "show", point["life_uuid"])
    assert shown["resource_id"] == "gpu-1"
    cancelled = cli.json("schedule", "cancel", point["life_uuid"])
    assert cancelled["state"] == "Stillbirth"
    assert Life.objects.get(life_uuid=point["life_uuid"]).state == "Stillbirth"
    assert (
        cli.json("schedule", "list", "--state", "Stillbirth")[0]["life_uuid"] == point["life_uuid"]
    )


def test_schedule_book_from_a_file(cli: Cli, researcher: User, tmp_path: Path) -> None:
    booking = tmp_path / "booking.json"
    booking.write_text(
        '{"schedule_type": "point", "birth_time": "2030-02-01 08:00:00",'
        ' "birth_action": {"path": "/api/me/", "method": "GET"}}'
    )
    life = cli.json("schedule", "book", "--file", str(booking))
    assert life["schedule_type"] == "point"
    assert life["birth_time"].startswith("2030-02-01T08:00:00")


def test_human_output_is_tables_not_json(cli: Cli, researcher: User) -> None:
    cli.json("reserve")
    result = cli.run("quota")
    assert result.code == 0
    assert "concurrent jobs" in result.stdout
    assert "active reservations" in result.stdout
    result = cli.run("jobs")
    assert result.code == 0
    assert "status" in result.stdout
    booked = cli.run("schedule", "book", "--at", "+3h", "--path", "/api/me/", "--method", "GET")
    assert booked.code == 0, booked.stderr
    assert "Inexistent" in booked.stdout
    assert "birth" in booked.stdout
    listed = cli.run("schedule", "list")
    assert listed.code == 0
    assert "point" in listed.stdout
    for command in (["whoami"], ["leaderboard"], ["review", "queue"]):
        result = cli.run(*command)
        assert result.code in (0, 1), result.stderr  # the queue is for reviewers only
        assert "Traceback" not in result.stderr


def test_submit_refuses_locally_before_any_request(cli: Cli, tmp_path: Path) -> None:
    folder = write_files(tmp_path / "bad", {"main.py": "x = 1\n"})  # no config.yaml
    result = cli.run("submit", str(folder), "--json")
    assert result.code == 1
    body = result.json()
    assert body["code"] == "refused_locally"
    assert any("config.yaml" in p for p in body["problems"])
    nested = write_files(tmp_path / "nested", {"main.py": "", "config.yaml": ""})
    write_files(nested / "lib", {"helper.py": ""})
    result = cli.run("submit", str(nested))
    assert result.code == 1
    assert "sub-folders" in result.stderr
    exe = write_files(tmp_path / "exe", {"main.py": "", "config.yaml": "", "tool.exe": ""})
    result = cli.run(
        "submit", str(exe / "main.py"), str(exe / "config.yaml"), str(exe / "tool.exe")
    )
    assert result.code == 1
    assert "extension not allowed" in result.stderr
    assert Submission.objects.count() == 0


def test_a_folder_walk_leaves_out_other_extensions(cli: Cli, tmp_path: Path) -> None:
    folder = write_files(
        tmp_path / "walk",
        {"main.py": "x = 1\n", "config.yaml": "a: 1\n", "README.md": "hi"},
    )
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"\0")
    (folder / ".git").mkdir()
    (folder / ".git" / "config.py").write_text("")
    result = cli.json("submit", str(folder))
    assert sorted(f["filename"] for f in result["files"]) == ["config.yaml", "main.py"]
    assert result["left_out"] == [str(folder / "README.md")]
    assert set(SubmissionFile.objects.values_list("filename", flat=True)) == {
        "main.py",
        "config.yaml",
    }


def test_progress_bars_render_on_a_terminal(cli: Cli, tmp_path: Path) -> None:
    folder = write_files(
        tmp_path / "big",
        {"main.py": "x = 1\n", "config.yaml": "a: 1\n", "weights.zip": _zip(2 * 1024 * 1024)},
    )
    result = cli.run("submit", str(folder), "--progress", COLUMNS="120")
    assert result.code == 0, result.stderr
    assert "3/3 files" in result.stderr
    assert "weights.zip" in result.stderr
    assert result.stdout.strip() == Job.objects.get().pk


def _zip(size: int) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("data.bin", os.urandom(size))
    return buffer.getvalue()
