"""Large files through `/api/uploads/` (the IETF resumable upload draft, interop version 8):
the real `yoyaku` console script against a live server, through a real proxy that counts the
bytes reaching the server. `MAX_UPLOAD_FILE_SIZE` is set small so that a few MiB are large.

`yoyaku submit` killed with SIGKILL in the middle of a file's upload, then run again: one
submission, one job, the file's right sha256, the second run sent only the bytes after the
offset the server had stored, and the upload's state file is gone once the file is attached.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from apps.jobs.models import Job
from apps.submissions.models import ResumableUpload, Submission, SubmissionFile
from tests.client.conftest import HELLO_CONFIG, HELLO_MAIN, Cli, write_files
from tests.client.proxy import FaultProxy
from tests.processes import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MIB = 1024 * 1024
UPLOAD_PATH = r"^/api/uploads/[^/]+/$"
CREATE_PATH = r"^/api/uploads/$"


@pytest.fixture
def small_files(settings: Any) -> int:
    """Files over 1 MiB are large (resumable)."""
    settings.MAX_UPLOAD_FILE_SIZE = MIB
    return MIB


def _content(size: int) -> bytes:
    line = b"# " + b"0123456789abcdef" * 63 + b"\n"
    return (line * (size // len(line) + 1))[:size]


def _kill(process: subprocess.Popen[str]) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL


def _stored_offset(cli: Cli) -> tuple[str, int]:
    """The upload the killed run kept in its state file, and the offset the server stored."""
    states = list((cli.config_dir / "uploads").glob("resumable-*.json"))
    assert len(states) == 1, states
    upload_id = json.loads(states[0].read_text())["upload_id"]
    # The interrupted append ends on the server after the client died (the bytes it received
    # are saved then): read the offset once its claim is given back, not while it is saving.
    wait_for(
        lambda: ResumableUpload.objects.filter(pk=upload_id, writer="").exists(),
        60,
        "the interrupted append to end",
    )
    head = httpx.head(
        f"{cli.url}/api/uploads/{upload_id}/",
        headers={
            "Authorization": f"Bearer {cli.token}",
            "Upload-Draft-Interop-Version": "8",
        },
    )
    assert head.status_code in (200, 204), head.text
    return upload_id, int(head.headers["Upload-Offset"])


def test_submit_killed_mid_upload_then_run_again_sends_only_the_bytes_after_the_offset(
    cli: Cli, proxy: FaultProxy, tmp_path: Path, small_files: int
) -> None:
    data = _content(8 * MIB)
    folder = write_files(
        tmp_path / "big",
        {"main.py": HELLO_MAIN, "config.yaml": HELLO_CONFIG, "data.py": data},
    )
    # Hold the fourth PATCH when half its body has arrived: three MiB are stored by then (the
    # fourth's rest may still be in the kernel's buffers and reach the server after the kill,
    # making four).
    held = proxy.pause("PATCH", UPLOAD_PATH, skip=3)
    # One file at a time: main.py waits behind data.py.
    process = cli.via(proxy.url).popen(
        "submit", str(folder), "--json", "--parallel", "1", YOYAKU_UPLOAD_CHUNK_SIZE=str(MIB)
    )
    assert held.reached.wait(timeout=120), "the upload never reached its fourth PATCH"
    _kill(process)
    # Whether the dead client's fourth body reaches the server depends on how much of it the
    # kernel held when the client died: wait until the proxy forwarded it whole (and the server
    # answered) or gave it up, then read what the server stored.
    held.go.set()
    assert held.done.wait(timeout=120), "the proxy never finished with the held request"
    upload_id, stored = _stored_offset(cli)
    assert 3 * MIB <= stored < len(data)
    assert Job.objects.count() == 0
    before = proxy.body_bytes("PATCH", UPLOAD_PATH)

    again = cli.via(proxy.url).json("submit", str(folder), YOYAKU_UPLOAD_CHUNK_SIZE=str(MIB))

    assert proxy.body_bytes("PATCH", UPLOAD_PATH) - before == len(data) - stored
    assert proxy.count("POST", CREATE_PATH) == 1  # the second run carried on the same upload
    assert again["resumed"] is True
    actions = {f["filename"]: f["action"] for f in again["files"]}
    assert actions == {"config.yaml": "already stored", "data.py": "resumed", "main.py": "uploaded"}
    submission = Submission.objects.get()
    assert again["submission_id"] == submission.pk
    stored_file = SubmissionFile.objects.get(submission=submission, filename="data.py")
    assert stored_file.size == len(data)
    assert stored_file.sha256 == hashlib.sha256(data).hexdigest()
    assert [j.pk for j in Job.objects.all()] == [again["job_id"]]
    assert upload_id  # the upload the first run made is the one the second finished
    # Nothing is left to resume: the state of the attached upload is gone.
    left = list((cli.config_dir / "uploads").glob("resumable-*.json"))
    assert left == []
