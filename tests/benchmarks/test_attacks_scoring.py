"""Attacks on two-stage scoring, run for real in bubblewrap: what a participant's run stage
leaves in `/output` (links, FIFOs, odd names) as the scorer reads it; a scorer that echoes a
participant's bytes (NUL, lone surrogates) into its `invalid` message; a host's scorer looking
for the network, the platform and another challenge's reference data; a huge scores.json."""

from __future__ import annotations

import json
import secrets
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User

from apps.grading.phases import INVALID_PREDICTIONS, SCORING_FAILED
from tests.benchmarks.scoring import (
    apply_bundle,
    graded,
    host_user,
    phase_of,
    phase_submission,
    predictions_csv,
    program,
    scorer_replaced,
)
from tests.grading.conftest import sandbox_settings  # noqa: F401 - the fixture
from tests.grading.workers import REPORT, read_report

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sandbox_settings")]

SCORES = '{"public": {"accuracy": 0.5, "errors": 1.0}, "private": {"accuracy": 0.5, "errors": 1.0}}'

# A run stage that leaves every kind of thing the scorer could trip on in /output.
HOSTILE_OUTPUT = """
import os
open("/output/predictions.csv", "w").write("id,label\\ns0,1\\n")
attempts = {}
def attempt(name, make):
    try:
        make()
        attempts[name] = "made"
    except OSError as exc:
        attempts[name] = type(exc).__name__
attempt("symlink", lambda: os.symlink("/reference/labels.csv", "/output/ref.csv"))
attempt("dir-symlink", lambda: os.symlink("/reference", "/output/refdir"))
attempt("fifo", lambda: os.mkfifo("/output/fifo.csv"))
attempt("hardlink", lambda: os.link("/output/predictions.csv", "/output/hard.csv"))
attempt("newline", lambda: open("/output/a\\nb.csv", "w").write("x"))
attempt("dots", lambda: open("/output/..csv", "w").write("x"))
attempt("socket", lambda: __import__("socket").socket(1).bind("/output/sock.csv"))
print("ATTEMPTS", attempts, flush=True)
"""

# A scorer that reports what it finds in /predictions, never blocking on what it opens.
INSPECTING_SCORER = (
    REPORT
    + """
import os, stat
kinds = {}
for name in sorted(os.listdir("/predictions")):
    mode = os.lstat(os.path.join("/predictions", name)).st_mode
    kinds[name] = "file" if stat.S_ISREG(mode) else "dir" if stat.S_ISDIR(mode) else "other"
links = [n for n in kinds if os.stat(os.path.join("/predictions", n)).st_nlink > 1]
report(sorted(kinds.items()), links=links)
open("/scores/scores.json", "w").write(SCORES)
"""
).replace("SCORES", repr(SCORES))


def test_links_fifos_and_odd_names_in_output_reach_the_scorer_as_plain_files_or_not_at_all(
    user: User,
) -> None:
    challenge = apply_bundle(host_user(), extra=scorer_replaced(INSPECTING_SCORER))
    submission, job = phase_submission(user, phase_of(challenge, "code"), program(HOSTILE_OUTPUT))
    submission, job, entry = graded(submission, job)
    assert submission.status == "completed", (submission.status_reason, entry.scoring_logs)
    seen = read_report(entry.scoring_logs)
    kinds = dict(seen["found"])
    assert set(kinds.values()) == {"file"}  # no link, FIFO, socket or folder reached it
    # tar sends a hard link's second name as a link, which is left out: one copy arrives
    assert {"predictions.csv", "hard.csv"} & set(kinds)
    assert not {"ref.csv", "refdir", "fifo.csv", "sock.csv"} & set(kinds)
    assert seen["links"] == []  # nothing shares an inode with anything
    assert not [name for name in kinds if "/" in name or name in (".", "..")]


# A scorer that judges the predictions invalid and quotes the participant's bytes back.
ECHOING_SCORER = """
import json
line = open("/predictions/predictions.csv", encoding="utf-8", errors="surrogateescape").read()
bad = "bad row: " + line + " \\x00 \\ud800 end"
open("/scores/scores.json", "w").write(json.dumps({"invalid": bad}))
"""


def test_a_scorer_echoing_nul_and_lone_surrogates_into_invalid_fails_cleanly(
    user: User, client_for: Any
) -> None:
    """The host may quote the predictions in its message (its choice); the participant may put
    any byte in them. The submission must still end `failed` with `invalid_predictions`, and
    every answer about it must still render. (Found: the message was stored as written, and a
    lone surrogate, or a NUL on PostgreSQL, made the result's write raise in the worker.)"""
    challenge = apply_bundle(host_user(), extra=scorer_replaced(ECHOING_SCORER))
    files = {"predictions.csv": b"id,label\nx\x00y,\xff\n"}
    submission, job = phase_submission(user, phase_of(challenge, "dev"), files)
    submission, job, entry = graded(submission, job)
    assert (submission.status, entry.failure) == ("failed", INVALID_PREDICTIONS)
    assert submission.status_reason.startswith("The predictions are invalid: bad row:")
    assert "\x00" not in submission.status_reason
    assert "\ufffd" in submission.status_reason  # replaced, the rest of the message kept
    client = client_for(user)
    for url in (f"/api/submissions/{submission.pk}/", f"/api/jobs/{job.pk}/", "/api/submissions/"):
        response = client.get(url)
        assert response.status_code == HTTPStatus.OK, url
        json.dumps(response.json())  # renders as JSON


HUGE_SCORER = """
block = " " * (1 << 20)
with open("/scores/scores.json", "w") as out:
    out.write('{"public": {"accuracy": 0.5, "errors": 1.0}, ')
    out.write('"private": {"accuracy": 0.5, "errors": 1.0}')
    for _ in range(12):
        out.write(block)
    out.write("}")
"""


def test_a_huge_scores_json_is_a_scoring_failure_and_not_read_whole(user: User) -> None:
    challenge = apply_bundle(host_user(), extra=scorer_replaced(HUGE_SCORER))
    submission, job = phase_submission(
        user, phase_of(challenge, "dev"), {"predictions.csv": predictions_csv()}
    )
    submission, job, entry = graded(submission, job)
    assert (submission.status, entry.failure) == ("failed", SCORING_FAILED)
    assert entry.scores.count() == 0


# A host's scorer looking for everything outside its own challenge.
ESCAPING_SCORER = """
import os, socket
marker = {marker!r}
found = []
for top in ("/", "/tmp"):
    for folder, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev", "usr")]
        for name in files:
            path = os.path.join(folder, name)
            if name in ("marker.txt", "db.sqlite3", ".env") or "bundle" in path.lower():
                found.append(path)
            elif name.endswith((".csv", ".txt")) and os.path.getsize(path) < 1 << 20:
                try:
                    if marker in open(path, errors="replace").read():
                        found.append(path)
                except OSError:
                    pass
network = []
for address in (("127.0.0.1", 5432), ("127.0.0.1", 6379), ("1.1.1.1", 53)):
    try:
        socket.create_connection(address, timeout=1).close()
        network.append(address[1])
    except OSError:
        pass
secrets_seen = [k for k in os.environ if "SECRET" in k or "DATABASE" in k or "REDIS" in k]
others = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            others.append(open(f"/proc/{{pid}}/cmdline", "rb").read().decode(errors="replace"))
        except OSError:
            pass
report(found, network=network, env=secrets_seen, processes=len(others),
       reference=sorted(os.listdir("/reference")))
open("/scores/scores.json", "w").write({scores!r})
"""


def test_a_scorer_finds_no_network_no_platform_and_no_other_challenges_reference(
    user: User,
) -> None:
    host = host_user()
    marker = "marker-" + secrets.token_hex(12)
    victim = apply_bundle(host, extra={"data/ref/marker.txt": marker.encode()})
    # The victim's folders are in this worker's bundle cache once one of its submissions ran.
    submission, job = phase_submission(
        user, phase_of(victim, "dev"), {"predictions.csv": predictions_csv()}
    )
    assert graded(submission, job)[0].status == "completed"

    def other(document: dict[str, Any]) -> None:
        document["slug"] = "other"

    attacker = apply_bundle(
        host,
        extra=scorer_replaced(REPORT + ESCAPING_SCORER.format(marker=marker, scores=SCORES)),
        change=other,
    )
    submission, job = phase_submission(
        user, phase_of(attacker, "dev"), {"predictions.csv": predictions_csv()}
    )
    submission, job, entry = graded(submission, job)
    assert submission.status == "completed", entry.scoring_logs
    seen = read_report(entry.scoring_logs)
    assert seen["found"] == []
    assert seen["network"] == []
    assert seen["env"] == []
    assert "marker.txt" not in seen["reference"]
    assert seen["processes"] <= 3  # its own sandbox's: nothing of the worker or the host
