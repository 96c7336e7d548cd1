"""What a new user sees in their first hour with `yoyaku`: scores in every job view, a score
that waits for a reviewer said as such, their submissions, the questions and one board per
question, ids that fit 80 columns and are taken back as prefixes, malformed ids named as such,
a clear answer when re-running a cancelled submission, and shell completion."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User

from apps.jobs.models import Job
from apps.submissions.models import SubmissionStatus
from tests.client.conftest import EXAMPLES, Cli, token_for
from tests.factories.jobs import make_job
from tests.factories.submissions import make_graded_submission
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db(transaction=True)

HEX32 = re.compile(r"[0-9a-f]{32}")


def _job(owner: User, *, score: float | None, status: str, job_id: str | None = None) -> Job:
    submission = make_graded_submission(owner, score=score, status=status, question_id="q1")
    fields: dict[str, Any] = {"status": "completed"}
    if job_id is not None:
        fields["id"] = job_id
    return make_job(submission, **fields)


def test_jobs_and_job_show_the_score_and_the_submission_status(cli: Cli, researcher: User) -> None:
    graded = _job(researcher, score=0.75, status=SubmissionStatus.COMPLETED)
    pending = _job(researcher, score=0.5, status=SubmissionStatus.REVIEW_PENDING)

    listed = {j["job_id"]: j for j in cli.json("jobs")}
    assert (listed[graded.pk]["score"], listed[graded.pk]["submission_status"]) == (
        0.75,
        "completed",
    )
    assert (listed[pending.pk]["score"], listed[pending.pk]["submission_status"]) == (
        0.5,
        "review_pending",
    )
    shown = cli.json("job", pending.pk)
    assert (shown["score"], shown["submission_status"]) == (0.5, "review_pending")

    table = cli.run("jobs")
    assert table.code == 0, table.stderr
    assert "0.75" in table.stdout
    assert "0.5 pending" in table.stdout
    one = cli.run("job", pending.pk)
    assert "0.5 pending" in one.stdout
    assert "review_pending" in one.stdout


def test_submit_wait_tells_a_score_awaiting_review_from_a_final_one(cli: Cli, grading: Any) -> None:
    result = cli.run("submit", str(EXAMPLES / "needs-review"), "--wait", "--timeout", "120")
    assert result.code == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last == "completed, awaiting review (score 0.5 pending)"
    assert "awaits a human review" in result.stderr


def test_tables_fit_80_columns_and_every_shortened_id_is_taken_back(
    cli: Cli, researcher: User
) -> None:
    """Two jobs whose ids share 9 characters: the column shows 10, each on one line."""
    first = _job(researcher, score=1.0, status="completed", job_id="abcdef0123" + "0" * 22)
    second = _job(researcher, score=0.25, status="completed", job_id="abcdef0124" + "1" * 22)
    reservation = cli.json("reserve")
    life = cli.json("schedule", "book", "--at", "+3h", "--path", "/api/me/", "--method", "GET")

    tables = (["jobs"], ["submissions"], ["quota"], ["leaderboard"], ["questions"])
    for command in (*tables, ["schedule", "list"], ["token", "list"]):
        result = cli.run(*command, COLUMNS="80")
        assert result.code == 0, (command, result.stderr)
        for line in result.stdout.splitlines():
            assert len(line) <= 80, (command, line)
        assert not HEX32.search(result.stdout), (command, result.stdout)

    jobs = cli.run("jobs", COLUMNS="80").stdout
    assert "abcdef0123 " in jobs
    assert "abcdef0124 " in jobs
    assert cli.json("job", "abcdef0123")["job_id"] == first.pk
    assert cli.json("job", "ABCDEF0124")["job_id"] == second.pk
    assert cli.json("logs", "abcdef0124")["job_id"] == second.pk
    assert cli.json("release", reservation["reservation_id"][:8])["state"] == "released"
    assert cli.json("schedule", "show", life["life_uuid"][:8])["life_uuid"] == life["life_uuid"]
    assert cli.json("jobs")[0]["job_id"] in (first.pk, second.pk)  # --json keeps full ids


def test_an_ambiguous_prefix_lists_the_candidates_and_an_unknown_one_is_not_found(
    cli: Cli, researcher: User
) -> None:
    first = _job(researcher, score=1.0, status="completed", job_id="abcdef0123" + "0" * 22)
    second = _job(researcher, score=0.25, status="completed", job_id="abcdef0124" + "1" * 22)

    ambiguous = cli.run("job", "abcdef01", "--json")
    assert ambiguous.code == 2
    body = ambiguous.json()
    assert body["code"] == "ambiguous_id"
    assert body["candidates"] == sorted([first.pk, second.pk])
    assert first.pk in ambiguous.stderr
    assert second.pk in ambiguous.stderr

    unknown = cli.run("cancel", "fedc", "--json")
    assert unknown.code == 1
    assert unknown.json()["code"] == "unknown_id"


def test_another_users_job_is_never_found_by_a_prefix(cli: Cli, researcher: User) -> None:
    """A prefix resolves among the caller's own objects only: guessing the start of someone
    else's job id finds nothing of theirs."""
    victim = make_user(username="victim")
    theirs = _job(victim, score=1.0, status="completed")
    result = cli.run("job", theirs.pk[:8], "--json")
    assert result.code == 1
    assert result.json()["code"] == "unknown_id"
    assert theirs.pk not in result.stdout + result.stderr


@pytest.mark.parametrize("given", ["abc", "xyz12345", "0" * 33, "12345678-1234"])
def test_a_malformed_id_is_named_before_any_request(cli: Cli, given: str) -> None:
    for command in (["logs", given], ["job", given], ["cancel", given]):
        result = cli.run(*command)
        assert result.code == 2, (command, result.stderr)
        assert "not a job id" in result.stderr or "too short" in result.stderr
        assert "No API endpoint" not in result.stderr


def test_resubmitting_a_cancelled_run_says_so_and_retry_makes_one_new_job(
    cli: Cli, researcher: User
) -> None:
    first = cli.json("submit", str(EXAMPLES / "hello"))
    cli.json("cancel", first["job_id"])

    again = cli.run("submit", str(EXAMPLES / "hello"), "--json")
    assert again.code == 3, again.stderr
    assert "already ran" in again.stderr
    assert "--retry" in again.stderr
    body = again.json()
    assert (body["job_id"], body["status"], body["matched_existing"]) == (
        first["job_id"],
        "cancelled",
        True,
    )
    assert Job.objects.count() == 1

    retried = cli.json("submit", str(EXAMPLES / "hello"), "--retry")
    assert retried["job_id"] != first["job_id"]
    assert retried["retried"] == [first["job_id"]]
    assert Job.objects.count() == 2
    # The same --retry command again finds that one retry, never a third job.
    same = cli.json("submit", str(EXAMPLES / "hello"), "--retry")
    assert same["job_id"] == retried["job_id"]
    assert same["matched_existing"] is True
    assert Job.objects.count() == 2


def test_an_explicit_key_still_returns_the_original_cancelled_job(
    cli: Cli, researcher: User
) -> None:
    first = cli.json("submit", str(EXAMPLES / "hello"), "--idempotency-key", "ci-abc")
    cli.json("cancel", first["job_id"])
    again = cli.run("submit", str(EXAMPLES / "hello"), "--idempotency-key", "ci-abc", "--json")
    assert again.code == 3
    assert again.json()["job_id"] == first["job_id"]
    assert Job.objects.count() == 1


def test_submissions_lists_yours_with_status_and_score(cli: Cli, researcher: User) -> None:
    mine = make_graded_submission(researcher, score=0.5, status=SubmissionStatus.REVIEW_PENDING)
    make_graded_submission(make_user(username="other"), score=0.9, question_id="q9")
    rows = cli.json("submissions")
    assert [(r["submission_id"], r["status"], r["score"]) for r in rows] == [
        (mine.pk, "review_pending", 0.5)
    ]
    assert cli.json("submissions", "--status", "completed") == []
    assert "0.5 pending" in cli.run("submissions").stdout


def test_questions_and_one_board_per_question(cli: Cli, researcher: User) -> None:
    other = make_user(username="other")
    make_graded_submission(researcher, score=0.5, question_id="q1", skill="en")
    make_graded_submission(other, score=0.9, question_id="q1", skill="en")
    make_graded_submission(other, score=0.2, question_id="q2")
    anonymous = cli.as_user(None)

    assert [(q["question_id"], q["users"]) for q in anonymous.json("questions")] == [
        ("q1", 2),
        ("q2", 1),
    ]
    boards = anonymous.json("leaderboard")
    assert [(b["question_id"], [r["user"]["username"] for r in b["rows"]]) for b in boards] == [
        ("q1", ["other", "researcher"]),
        ("q2", ["other"]),
    ]
    table = anonymous.run("leaderboard").stdout
    assert "question q1" in table
    assert "question q2" in table
    one = anonymous.json("leaderboard", "--question", "q2")
    assert [r["score"] for r in one] == [0.2]


def test_shell_completion_prints_a_script(cli: Cli) -> None:
    for shell, marker in (("bash", "complete "), ("zsh", "compdef"), ("fish", "complete ")):
        result = cli.run(_YOYAKU_COMPLETE=f"{shell}_source")
        assert result.code == 0, result.stderr
        assert marker in result.stdout
        assert "_YOYAKU_COMPLETE" in result.stdout


def test_a_reviewer_claims_by_prefix(cli: Cli, researcher: User) -> None:
    submission = make_graded_submission(
        researcher, score=0.5, status=SubmissionStatus.REVIEW_PENDING
    )
    reviewer = cli.as_user(token_for(make_user(username="rita", reviewer=True)))
    queue = reviewer.run("review", "queue", COLUMNS="80")
    assert submission.pk[:8] in queue.stdout
    claim = reviewer.json("review", "claim", submission.pk[:8])
    assert claim["submission_id"] == submission.pk


def test_token_revoke_takes_a_prefix(cli: Cli) -> None:
    made = cli.json("token", "create", "spare", "--scope", "read")
    listed = cli.run("token", "list", COLUMNS="80")
    assert made["id"][:8] in listed.stdout
    assert cli.json("token", "revoke", made["id"][:8])["id"] == made["id"]
