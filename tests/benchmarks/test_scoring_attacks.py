"""Attacks on two-stage scoring, run for real: a participant's program that looks for the
reference data or the scoring program, writes where only the scorer writes, or forges its
score; a marker in the reference data that the scorer prints never reaches the participant
(job logs, the submission's and the job's API answers, errors). Hosts read it."""

from __future__ import annotations

import secrets
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User

from apps.grading.models import GradingAttempt
from tests.benchmarks.scoring import (
    apply_bundle,
    graded,
    host_user,
    phase_of,
    phase_submission,
    predictions_csv,
    program,
    scorer_replaced,
    scores_of,
)
from tests.grading.conftest import sandbox_settings  # noqa: F401 - the fixture
from tests.grading.workers import REPORT, read_report

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sandbox_settings")]

SNOOP = (
    REPORT
    + """
import os
found = []
for path in ("/reference", "/predictions", "/scores", "/input", "/sandbox/output/../scores"):
    if os.path.exists(path):
        found.append(path)
for top in ("/", "/tmp", "/sandbox", "/data"):
    for folder, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "usr", "dev")]
        for name in files:
            if name in ("labels.csv", "score.py", "marker.txt"):
                found.append(os.path.join(folder, name))
written = []
for target in ("/scores/scores.json", "/predictions/predictions.csv", "/reference/x"):
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "w").write('{"public": {"accuracy": 1e300, "errors": 0}}')
        written.append(target)
    except OSError:
        pass
try:
    os.symlink("/reference/labels.csv", "/output/labels.csv")
except OSError:
    pass
open("/output/scores.json", "w").write('{"public": {"accuracy": 1e300, "errors": 0}}')
open("metrics.json", "a").close() if os.access(".", os.W_OK) else None
open("/output/predictions.csv", "w").write("id,label\\ns0,9\\n")
report(found, written=written, data=sorted(os.listdir("/data")))
"""
)


def test_a_program_finds_neither_reference_data_nor_scorer_and_cannot_forge_scores(
    user: User,
) -> None:
    marker = "marker-" + secrets.token_hex(12)
    challenge = apply_bundle(host_user(), extra={"data/ref/marker.txt": marker.encode()})
    submission, job = phase_submission(user, phase_of(challenge, "code"), program(SNOOP))
    submission, job, entry = graded(submission, job)
    report = read_report(job.logs)
    assert report == {"found": [], "written": [], "data": ["test.csv"]}
    assert submission.status == "completed"
    scores = scores_of(entry)
    assert scores["public"]["accuracy"] == 0.0  # s0 is wrong; nothing else predicted
    assert scores["private"] == {"accuracy": 0.0, "errors": 15.0}
    assert marker not in job.logs


def test_uploaded_scores_and_metrics_files_are_not_scores(user: User) -> None:
    challenge = apply_bundle(host_user())
    forged = b'{"public": {"accuracy": 1e300, "errors": 0}, "score": 1e300}'
    files = {
        "predictions.csv": predictions_csv(tuple(f"s{i}" for i in range(30))),
        "scores.json": forged,
        "metrics.json": forged,
    }
    submission, job = phase_submission(user, phase_of(challenge, "dev"), files)
    submission, job, entry = graded(submission, job)
    assert (submission.status, submission.score) == ("completed", None)
    assert scores_of(entry)["public"] == {"accuracy": 0.0, "errors": 15.0}


LEAKY_SCORER = """
import json, sys
marker = open("/reference/marker.txt").read()
print("reference says", marker)
print("stderr too", marker, file=sys.stderr)
if {crash}:
    raise RuntimeError("cannot score: " + marker)
scores = {{"accuracy": 0.5, "errors": 1.0}}
open("/scores/scores.json", "w").write(json.dumps({{"public": scores, "private": scores}}))
"""


@pytest.mark.parametrize("crash", [False, True], ids=["scored", "scorer-crashed"])
def test_a_reference_marker_the_scorer_prints_reaches_hosts_only(
    user: User, client_for: Any, crash: bool
) -> None:
    marker = "marker-" + secrets.token_hex(12)
    challenge = apply_bundle(
        host_user(),
        extra={
            "data/ref/marker.txt": marker.encode(),
            **scorer_replaced(LEAKY_SCORER.format(crash=crash)),
        },
    )
    for slug, files in (
        ("dev", {"predictions.csv": predictions_csv()}),
        ("code", program("open('/output/predictions.csv', 'w').write('id,label\\n')\n")),
    ):
        submission, job = phase_submission(user, phase_of(challenge, slug), files)
        submission, job, entry = graded(submission, job)
        assert submission.status == ("failed" if crash else "completed")
        assert marker in entry.scoring_logs  # hosts read it
        seen = [job.logs, job.error, submission.status_reason]
        seen += [a.reason for a in GradingAttempt.objects.filter(submission=submission)]
        client = client_for(user)
        for url in (
            f"/api/submissions/{submission.pk}/",
            f"/api/jobs/{job.pk}/",
            f"/api/jobs/{job.pk}/logs/",
            "/api/submissions/",
            "/api/jobs/",
        ):
            response = client.get(url)
            assert response.status_code == HTTPStatus.OK, url
            seen.append(response.content.decode())
        assert not [text for text in seen if marker in text]
        assert not [text for text in seen if "reference says" in text]
