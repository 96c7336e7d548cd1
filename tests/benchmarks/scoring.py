"""Helpers for the scoring tests: the example bundle applied (its scorer or reference data
changed as a test needs), and phase submissions made the way the submissions API makes them
(a submission with its stored files, a team of one, an entry), graded by the real worker
task in real bubblewrap sandboxes."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import tempfile
import textwrap
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User

from apps.benchmarks.models import Challenge, Entry, Phase, Team, TeamMember
from apps.benchmarks.services.apply import challenge_apply
from apps.grading.tasks import grade_job
from apps.jobs.models import Job
from apps.submissions.models import Submission, SubmissionStatus
from tests.benchmarks.bundles import EXAMPLE, bundle, grant_add_challenge
from tests.factories.jobs import make_job
from tests.factories.submissions import make_stored_submission
from tests.factories.users import make_user

SCORER = "scoring/score.py"


def reference_labels() -> dict[str, tuple[str, str]]:
    """id -> (label, split) of the example's reference data."""
    with (EXAMPLE / "data/ref/labels.csv").open(newline="") as handle:
        return {row["id"]: (row["label"], row["split"]) for row in csv.DictReader(handle)}


def predictions_csv(wrong: tuple[str, ...] = ()) -> bytes:
    """predictions.csv with every label right but those of the ids in `wrong`."""
    rows = ["id,label"]
    for key, (label, _) in reference_labels().items():
        rows.append(f"{key},{(int(label) + 1) % 10 if key in wrong else label}")
    return ("\n".join(rows) + "\n").encode()


def zipped(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def host_user() -> User:
    return grant_add_challenge(make_user(username="hostess"))


def apply_bundle(
    host: User,
    *,
    extra: dict[str, bytes] | None = None,
    change: Callable[[dict[str, Any]], None] | None = None,
) -> Challenge:
    """Apply the example bundle with `extra` files replacing or adding members, its phases'
    resources within the tests' GRADING_* limits (`sandbox_settings`)."""

    def changed(document: dict[str, Any]) -> None:
        for phase in document["phases"]:
            phase["resources"] = {"timeout": 5, "memory_mb": 256}
        if change is not None:
            change(document)

    data = bundle(changed, extra=extra)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bundle.zip"
        path.write_bytes(data)
        result = challenge_apply(
            user=host, bundle_path=path, sha256=hashlib.sha256(data).hexdigest()
        )
    assert result.challenge is not None
    return result.challenge


def scorer_replaced(body: str) -> dict[str, bytes]:
    """A scoring program of the test's own in place of the example's."""
    return {SCORER: textwrap.dedent(body).encode()}


def phase_of(challenge: Challenge, slug: str) -> Phase:
    return Phase.objects.get(challenge=challenge, slug=slug)


def phase_draft(
    user: User, phase: Phase, files: dict[str, bytes], *, status: str = SubmissionStatus.DRAFT
) -> Submission:
    """A phase submission of `user` (a team of one) with its stored files and its entry."""
    team, _ = Team.objects.get_or_create(challenge=phase.challenge, name=user.get_username())
    TeamMember.objects.get_or_create(team=team, challenge=phase.challenge, user=user)
    submission = make_stored_submission(user, extra_files=files, status=status)
    Entry.objects.create(submission=submission, phase=phase, team=team, user=user)
    return submission


def phase_submission(user: User, phase: Phase, files: dict[str, bytes]) -> tuple[Submission, Job]:
    """A pending phase submission and its queued job."""
    submission = phase_draft(user, phase, files, status=SubmissionStatus.PENDING)
    return submission, make_job(submission)


def graded(submission: Submission, job: Job) -> tuple[Submission, Job, Entry]:
    """Grade by the worker's task; the rows as they are afterwards."""
    grade_job(job.pk)
    submission.refresh_from_db()
    job.refresh_from_db()
    return submission, job, Entry.objects.get(pk=submission.pk)


def scores_of(entry: Entry) -> dict[str, dict[str, float]]:
    return {score.split: score.values for score in entry.scores.all()}


def program(body: str) -> dict[str, bytes]:
    """A code submission: `main.py` (the body) and `config.yaml`."""
    return {"main.py": textwrap.dedent(body).encode(), "config.yaml": b"{}\n"}


# A participant program that predicts every label right (it knows them, as a test may).
PERFECT = """
import csv, json
answers = json.loads({answers!r})
with open("/data/test.csv", newline="") as handle:
    ids = [row["id"] for row in csv.DictReader(handle)]
with open("/output/predictions.csv", "w") as out:
    out.write("id,label\\n")
    for key in ids:
        out.write(f"{{key}},{{answers[key]}}\\n")
print("predicted", len(ids), "rows")
"""


def perfect_program() -> dict[str, bytes]:
    answers = json.dumps({key: label for key, (label, _) in reference_labels().items()})
    return program(PERFECT.format(answers=answers))
