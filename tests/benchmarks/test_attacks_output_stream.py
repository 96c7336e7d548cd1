"""A participant's run stage forging the tar stream its runner hands back (`/output` brought
out of the sandbox), run for real in bubblewrap.

The program shares its runner's uid, so it may write the runner's memory through
`/proc/2/mem`: it rewrites the rest of the runner's script (dash keeps a copy on its heap) to
`cat` a file of the program's choosing into the result channel. The worker then reads any bytes
as the output folder's tar stream. Read by plain `tarfile` (found): a chain of GNU long-name
headers was a RecursionError in the worker, which made the grading a platform fault
(`scoring_failed`, refunded: a free submission, as often as wanted); a long name or a pax header
was read whole into the worker's memory; a 20-digit exit status overflowed the attempt's
`exit_code` column when the result was written (the task raised, the lease ran out, and after
GRADING_MAX_ATTEMPTS the worker was "lost": refunded). Now the stream is read as uploads are,
a status is only 0-255, and a forged report is the participant's own failure, counted.

These programs run under the shell runner, which a host without a C compiler uses: the compiled
runner (`apps/grading/isolation/runner.c`) is not dumpable, so its memory is out of the
program's reach (`tests/grading/test_runner.py`); the worker reads either's report as hostile."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from apps.benchmarks.models import Entry
from apps.grading.phases import SCORING_FAILED
from apps.jobs.services.submission import job_submit
from apps.submissions.models import Submission, SubmissionKind
from tests.benchmarks.scoring import apply_bundle, graded, host_user, phase_draft, phase_of, program
from tests.factories.submissions import add_file
from tests.grading.conftest import sandbox_settings  # noqa: F401 - the fixture

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.usefixtures("sandbox_settings", "shell_runner"),
]


@pytest.fixture
def shell_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("apps.grading.isolation.run.runner_binary", lambda: None)


# The forged stream: the report (`0`: exit status, `N`: no result file), then `HEADERS` and one
# member the scorer would read. The runner's script after the program is replaced by `cat`.
FORGER = r"""
import os, tarfile
def header(name, kind, size):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    return info.tobuf(format=tarfile.GNU_FORMAT)
def padded(data):
    return data + b"\0" * (-len(data) % 512)
HEADERS
body = b"id,label\n"
stream = (STATUS + b"\nN\n" + headers + header("forged.csv", tarfile.REGTYPE, len(body))
          + padded(body) + b"\0" * 1024)
open("/tmp/forged", "wb").write(stream)
patched = 0
with open("/proc/2/mem", "r+b", buffering=0) as mem:
    for line in open("/proc/2/maps"):
        span, perms = line.split()[:2]
        if not perms.startswith("rw"):
            continue
        low, high = (int(x, 16) for x in span.split("-"))
        mem.seek(low)
        try:
            data = mem.read(high - low)
        except OSError:
            continue
        at = data.find(b"rc=$?\nkill")
        while at >= 0:
            room = data.index(b"\0", at) - at
            patch = b"cat /tmp/forged; exit 0\n"
            mem.seek(low + at)
            mem.write(patch + b" " * (room - len(patch)))
            patched += 1
            at = data.find(b"rc=$?\nkill", at + 1)
print("PATCHED", patched, len(stream), flush=True)
open("/output/predictions.csv", "w").write("id,label\n")
"""

STREAMS = {
    # 3,000 GNU long-name headers in a row: a recursion each in tarfile.
    "chained_long_names": (
        'link = header("././@LongLink", tarfile.GNUTYPE_LONGNAME, 10) + padded(b"x" * 10)\n'
        "headers = link * 3000"
    ),
    # One 8 MiB long name: read whole into memory by tarfile.
    "huge_long_name": (
        "name = b'n' * (8 << 20)\n"
        'headers = header("././@LongLink", tarfile.GNUTYPE_LONGNAME, len(name)) + padded(name)'
    ),
}


def _forged_and_graded(user: User, *, headers: str, status: bytes = b"0") -> Submission:
    """A code submission forging its runner's report (`status`, no result file) and output
    stream (`headers`, then one member), enqueued, counted and graded: it must fail as the
    participant's own doing, counted, the scorer never run."""
    challenge = apply_bundle(host_user())
    code = FORGER.replace("HEADERS", headers).replace("STATUS", repr(status))
    submission = phase_draft(user, phase_of(challenge, "code"), {})
    Submission.objects.filter(pk=submission.pk).update(kind=SubmissionKind.CODE)
    for filename, content in program(code).items():
        add_file(submission, filename, content)
    job = job_submit(user=user, submission_id=submission.pk).job  # counted by the phase check
    assert Entry.objects.get(pk=submission.pk).counted
    submission, job, entry = graded(submission, job)
    assert "PATCHED" in job.logs, job.logs
    assert "PATCHED 0 " not in job.logs, job.logs  # the runner's script was rewritten
    assert submission.status == "failed"
    assert entry.failure != SCORING_FAILED, entry.scoring_logs  # no platform fault
    assert (entry.counted, entry.refund_reason) == (True, "")  # it counts: no free submission
    assert entry.scores.count() == 0
    assert entry.scoring_logs == ""  # the scorer never ran on the forged folder
    return submission


@pytest.mark.parametrize("kind", sorted(STREAMS))
def test_a_forged_output_stream_is_the_participants_own_counted_failure(
    user: User, kind: str
) -> None:
    submission = _forged_and_graded(user, headers=STREAMS[kind])
    assert "The output folder's archive was refused" in submission.status_reason


def test_a_forged_exit_status_out_of_range_is_the_participants_own_counted_failure(
    user: User,
) -> None:
    submission = _forged_and_graded(user, headers="headers = b''", status=b"9" * 20)
    assert "exit status out of range" in submission.status_reason
