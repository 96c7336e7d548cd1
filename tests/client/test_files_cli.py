"""`yoyaku review show`, `yoyaku download` and `yoyaku logs` for a reviewer, against a live
server: the right bytes on disk, and a name from the server never used as a path."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from apps.jobs.models import Job
from apps.submissions.models import Submission, SubmissionFile, SubmissionStatus
from tests.client.conftest import Cli
from tests.factories.jobs import make_job
from tests.factories.submissions import add_file, make_stored_submission, zip_bytes
from tests.factories.tokens import make_token
from tests.factories.users import make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ZIP = zip_bytes({"answers/a.txt": b"1\n", "answers/b.bin": b"\x00\x01"})
BINARY = os.urandom(300 * 1024)


@pytest.fixture
def waiting(researcher: User) -> Submission:
    submission = make_stored_submission(
        researcher, status=SubmissionStatus.REVIEW_PENDING, program="print('hi')\n"
    )
    add_file(submission, "answers.zip", ZIP)
    add_file(submission, "weights.py", BINARY)
    return submission


@pytest.fixture
def reviewer_cli(cli: Cli) -> Cli:
    return cli.as_user(make_token(make_user(username="rita", reviewer=True)))


def test_review_show_lists_files_members_and_the_grader_output(
    reviewer_cli: Cli, waiting: Submission
) -> None:
    make_job(waiting, logs="graded \x1b[31mred\x1b[0m\n")

    data = reviewer_cli.json("review", "show", waiting.pk)
    files = {f["filename"]: f for f in data["files"]}
    assert [m["name"] for m in files["answers.zip"]["members"]] == [
        "answers/a.txt",
        "answers/b.bin",
    ]
    assert data["logs"] == "graded \x1b[31mred\x1b[0m\n"

    shown = reviewer_cli.run("review", "show", waiting.pk)
    assert shown.code == 0, shown.stderr
    assert "answers/b.bin" in shown.stdout
    assert "weights.py" in shown.stdout
    assert "\x1b" not in shown.stdout
    assert "\\x1b[31mred" in shown.stdout


def test_download_writes_every_file_byte_for_byte_for_owner_and_reviewer(
    cli: Cli, reviewer_cli: Cli, waiting: Submission, tmp_path: Path
) -> None:
    for name, who in (("owner", cli), ("reviewer", reviewer_cli)):
        folder = tmp_path / name
        saved = who.json("download", waiting.pk, "-o", str(folder))
        assert {Path(s["path"]).name for s in saved} == {
            "main.py",
            "config.yaml",
            "answers.zip",
            "weights.py",
        }
        assert (folder / "answers.zip").read_bytes() == ZIP
        assert (folder / "weights.py").read_bytes() == BINARY
        assert not list(folder.glob(".yoyaku-*"))


def test_a_review_only_token_downloads_through_the_review_api(
    reviewer_cli: Cli, waiting: Submission, tmp_path: Path
) -> None:
    rita = User.objects.get(username="rita")
    review_only = reviewer_cli.as_user(make_token(rita, scopes=["review"]))
    review_only.json("download", waiting.pk, "answers.zip", "-o", str(tmp_path))
    assert (tmp_path / "answers.zip").read_bytes() == ZIP


def test_a_server_name_with_dot_dot_is_saved_inside_the_folder_or_refused(
    cli: Cli, waiting: Submission, tmp_path: Path
) -> None:
    stored = SubmissionFile.objects.get(submission=waiting, filename="answers.zip")
    SubmissionFile.objects.filter(pk=stored.pk).update(filename="../../escaped.zip")
    folder = tmp_path / "inside" / "deeper"

    cli.json("download", waiting.pk, str(stored.pk), "-o", str(folder))

    assert (folder / "escaped.zip").read_bytes() == ZIP
    assert not (tmp_path / "escaped.zip").exists()
    assert not (tmp_path / "inside" / "escaped.zip").exists()

    SubmissionFile.objects.filter(pk=stored.pk).update(filename="..")
    refused = cli.run("download", waiting.pk, str(stored.pk), "-o", str(folder))
    assert refused.code == 1
    assert "not saved" in refused.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["escaped.zip"]


def test_a_server_name_with_terminal_controls_is_refused_and_shown_escaped(
    cli: Cli, waiting: Submission, tmp_path: Path
) -> None:
    stored = SubmissionFile.objects.get(submission=waiting, filename="answers.zip")
    SubmissionFile.objects.filter(pk=stored.pk).update(filename="a\x1b]0;owned\x07.zip")

    folder = tmp_path / "out"

    refused = cli.run("download", waiting.pk, str(stored.pk), "-o", str(folder))

    assert refused.code == 1
    assert "\x1b" not in refused.stderr
    assert "\x07" not in refused.stderr
    assert list(folder.iterdir()) == []


def test_logs_works_for_a_reviewer_of_the_jobs_submission(
    reviewer_cli: Cli, waiting: Submission, researcher: User
) -> None:
    job: Job = make_job(waiting, logs="score 0.5\n")
    assert reviewer_cli.run("logs", job.pk).stdout == "score 0.5\n"

    finished = make_stored_submission(researcher, status=SubmissionStatus.COMPLETED)
    other: Job = make_job(finished, logs="private\n")
    refused = reviewer_cli.run("logs", other.pk, "--json")
    assert refused.code == 1
    assert refused.json()["code"] == "permission_denied"


def test_review_show_and_download_take_an_id_prefix_as_tables_show_it(
    cli: Cli, reviewer_cli: Cli, waiting: Submission, tmp_path: Path
) -> None:
    """The owner's prefix resolves among their submissions, a reviewer's among the queue; a
    prefix of nothing the caller may see is `unknown_id`, never another user's submission."""
    prefix = waiting.pk[:8]
    shown = reviewer_cli.json("review", "show", prefix)
    assert waiting.pk in json.dumps(shown)
    saved = cli.json("download", prefix, "answers.zip", "-o", str(tmp_path / "owner"))
    assert (tmp_path / "owner" / "answers.zip").read_bytes() == ZIP
    assert len(saved) == 1

    stranger = cli.as_user(make_token(make_user(username="stranger")))
    refused = stranger.run("download", prefix, "--json", "-o", str(tmp_path / "stranger"))
    assert refused.code == 1, refused.stderr
    assert refused.json()["code"] == "unknown_id"
