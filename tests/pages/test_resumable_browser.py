"""Large files from the pages as resumable uploads, in a real Chromium against a live server on
loopback: `/submit/` and a challenge's submit form send a file over the page's threshold in
small slices; the test cuts one PATCH off half-way (its first half reaches the server, then the
connection drops), and the page asks where the stored bytes end, continues from there, attaches
the finished upload and enqueues one job. The stored file is the original byte for byte. No
console error and no failed request but the one cut off; an upload of another user's stays
unreachable through the page's own calls (404); Cancel deletes the upload."""

from __future__ import annotations

import hashlib
import io
import os
import socket
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from django.core.files.storage import storages

from apps.jobs.models import Job
from apps.quotas.models import Reservation
from apps.submissions.models import ResumableUpload, Submission, SubmissionFile
from tests import faults
from tests.benchmarks.scoring import apply_bundle, host_user
from tests.factories.users import make_user
from tests.pages.challenge_support import open_now

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SLICE = 64 * 1024


@pytest.fixture(autouse=True)
def small_slices(settings: Any) -> None:
    """Slices of 64 KiB; files over 128 KiB go resumably, and one over 256 KiB could not go in
    one request at all."""
    settings.PAGES_UPLOAD_SLICE_BYTES = SLICE
    settings.PAGES_RESUMABLE_OVER_BYTES = 128 * 1024
    settings.MAX_UPLOAD_FILE_SIZE = 256 * 1024


def stored_zip(size: int) -> bytes:
    """A real zip of `size` random bytes (stored, so it stays that large)."""
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("weights.bin", os.urandom(size))
    return packed.getvalue()


class CutOff:
    """Route handler for the uploads' URLs: the `nth` PATCH is sent to the server by the test
    itself, only its first half, and the connection closed; the page sees its request fail
    (connection reset). Every other request goes on untouched."""

    def __init__(self, page: Any, live_url: str, content: bytes, nth: int) -> None:
        self.page, self.live_url, self.content, self.nth = page, live_url, content, nth
        self.patches = 0
        self.offset: int | None = None
        self.cut_at: int | None = None
        self.answer = b""

    def __call__(self, route: Any) -> None:
        request = route.request
        if request.method != "PATCH":
            route.continue_()
            return
        self.patches += 1
        if self.patches != self.nth:
            route.continue_()
            return
        offset = int(request.headers["upload-offset"])
        body = self.content[offset : offset + SLICE]
        half = len(body) // 2
        self.answer = self.send_half(request, offset, body, half)
        self.offset, self.cut_at = offset, offset + half
        route.abort("connectionreset")

    def send_half(self, request: Any, offset: int, body: bytes, half: int) -> bytes:
        url = urlsplit(request.url)
        cookies = "; ".join(f"{c['name']}={c['value']}" for c in self.page.context.cookies())
        head = (
            f"PATCH {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\nCookie: {cookies}\r\n"
            f"X-CSRFToken: {request.headers['x-csrftoken']}\r\nOrigin: {self.live_url}\r\n"
            "Content-Type: application/partial-upload\r\nUpload-Draft-Interop-Version: 8\r\n"
            f"Upload-Offset: {offset}\r\nUpload-Complete: ?0\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        with socket.create_connection((url.hostname, url.port), timeout=15) as conn:
            conn.sendall(head + body[:half])
            conn.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
        return answer


@pytest.fixture
def seen(page: Any) -> dict[str, list[str]]:
    """What the page did: its upload requests, failed requests, error answers, console errors."""
    log: dict[str, list[str]] = {"uploads": [], "failed": [], "errors": []}

    def on_request(request: Any) -> None:
        if "/api/uploads/" in request.url:
            offset = request.headers.get("upload-offset", "")
            log["uploads"].append(f"{request.method} {offset}".strip())

    page.on("request", on_request)
    page.on("requestfailed", lambda r: log["failed"].append(f"{r.method} {r.url}"))
    page.on(
        "response",
        lambda r: log["errors"].append(f"{r.status} {r.url}") if r.status >= 400 else None,
    )
    page.on("console", lambda m: log["errors"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: log["errors"].append(f"page error: {e}"))
    return log


def assert_resumed(seen: dict[str, list[str]], cut: CutOff) -> None:
    """One request failed (the one cut off), the page asked HEAD and continued from the offset
    the server named, mid-slice."""
    assert cut.cut_at is not None
    assert cut.cut_at % SLICE != 0
    assert b" 204 " in cut.answer.split(b"\r\n", 1)[0], cut.answer[:200]
    assert len(seen["failed"]) == 1, seen["failed"]
    assert seen["failed"][0].startswith("PATCH "), seen["failed"]
    # Chromium reports the one reset connection in the console; nothing else is an error.
    assert seen["errors"] == ["Failed to load resource: net::ERR_CONNECTION_RESET"]
    after = seen["uploads"][seen["uploads"].index(f"PATCH {cut.offset}") + 1 :]
    assert after[0] == "HEAD", seen["uploads"]
    assert f"PATCH {cut.cut_at}" in after, seen["uploads"]


def assert_stored(file: SubmissionFile, content: bytes) -> None:
    digest = hashlib.sha256(content).hexdigest()
    assert file.size == len(content)
    assert file.sha256 == digest
    with storages["default"].open(file.storage_name, "rb") as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == digest


def test_submit_page_resumes_a_cut_off_slice_and_enqueues_once(
    page: Any,
    live_server: Any,
    login: Callable[[User], Any],
    shots: Callable[[Any, str], Path],
    seen: dict[str, list[str]],
    tmp_path: Path,
) -> None:
    """The first file (a resumable upload) creates the submission, two small ones follow in one
    request each, a second large one is attached: all four stored as sent, one job."""
    user = make_user(username="large")
    login(user)
    model, weights = stored_zip(600 * 1024), stored_zip(200 * 1024)
    paths = {
        "model.zip": model,
        "main.py": b"print('hi')\n",
        "config.yaml": b"a: 1\n",
        "weights.zip": weights,
    }
    for name, content in paths.items():
        (tmp_path / name).write_bytes(content)
    cut = CutOff(page, live_server.url, model, nth=3)
    page.route("**/api/uploads/**", cut)

    page.goto("/submit/")
    page.set_input_files("#files", [str(tmp_path / name) for name in paths])
    page.fill("#question_id", "q1")
    page.click("#start")
    page.wait_for_selector("#overall-text:text('4/4 files uploaded')")
    page.wait_for_selector("#enqueue:not([disabled])")
    assert page.get_attribute("#progress-0", "value") == "1"
    shots(page, "submit-resumable-uploaded")

    assert_resumed(seen, cut)
    submission = Submission.objects.get(owner=user)
    files = {f.filename: f for f in SubmissionFile.objects.filter(submission=submission)}
    assert list(files) == list(paths)
    for name, content in paths.items():
        assert_stored(files[name], content)
    assert ResumableUpload.objects.filter(owner=user, attached_at__isnull=True).count() == 0

    page.dblclick("#enqueue")
    page.wait_for_selector("#job:not([hidden])")
    page.wait_for_timeout(500)
    job = Job.objects.get(owner=user)
    assert job.submission_id == submission.pk
    assert Reservation.objects.get(user=user).job_id == job.pk
    shots(page, "submit-resumable-enqueued")


def test_challenge_page_resumes_a_cut_off_slice_and_submits_once(
    page: Any,
    live_server: Any,
    login: Callable[[User], Any],
    shots: Callable[[Any, str], Path],
    seen: dict[str, list[str]],
    tmp_path: Path,
) -> None:
    apply_bundle(host_user(), change=open_now)
    pat = make_user(username="pat")
    login(pat)
    rows = b"".join(b"%d,%d\n" % (i, i % 10) for i in range(60_000))
    predictions = b"id,label\n" + rows  # ~500 KiB: over the page's threshold
    (tmp_path / "predictions.csv").write_bytes(predictions)
    cut = CutOff(page, live_server.url, predictions, nth=4)
    page.route("**/api/uploads/**", cut)

    page.goto("/challenges/digits/")
    page.click("#participate")
    page.wait_for_selector("#team-name")
    page.set_input_files("#files-dev", str(tmp_path / "predictions.csv"))
    page.click("#submit-dev")
    # The first submission made a team of one: the page reloads to show it.
    page.wait_for_selector("#team-name-shown:text('pat')")
    page.wait_for_selector("#phase-dev table.mine tr[data-status=pending]")
    shots(page, "challenge-resumable-submitted")

    assert_resumed(seen, cut)
    submission = Submission.objects.get(owner=pat)
    assert_stored(SubmissionFile.objects.get(submission=submission), predictions)
    assert Job.objects.filter(owner=pat).count() == 1
    assert Job.objects.get(owner=pat).submission_id == submission.pk


def test_a_slice_answered_503_is_sent_again_from_the_servers_offset(
    page: Any, login: Callable[[User], Any], seen: dict[str, list[str]], tmp_path: Path
) -> None:
    user = make_user(username="patient")
    login(user)
    model = stored_zip(300 * 1024)
    (tmp_path / "model.zip").write_bytes(model)
    faults.fail_next(
        lambda r: r.method == "PATCH" and r.headers.get("Upload-Offset") == str(SLICE), times=2
    )
    try:
        page.goto("/submit/")
        page.set_input_files("#files", str(tmp_path / "model.zip"))
        page.click("#start")
        page.wait_for_selector("#overall-text:text('1/1 files uploaded')")
    finally:
        faults.clear()
    at = f"PATCH {SLICE}"
    assert seen["uploads"][:8] == [
        "POST",
        "PATCH 0",
        at,
        "HEAD",
        at,
        "HEAD",
        at,
        f"PATCH {2 * SLICE}",
    ]
    assert seen["failed"] == []
    assert len(seen["errors"]) == 4, seen["errors"]
    assert all("503" in error for error in seen["errors"]), seen["errors"]
    assert_stored(SubmissionFile.objects.get(submission__owner=user), model)


def test_an_upload_of_another_user_is_404_through_the_pages_calls(
    page: Any, login: Callable[[User], Any], tmp_path: Path
) -> None:
    """The page's own session calls reach only the user's uploads: another user's id is 404
    for HEAD, PATCH, DELETE, attaching and creating a submission from it."""
    owner = make_user(username="owner")
    login(owner)
    page.goto("/submit/")
    upload_id = page.evaluate(
        """async () => {
            const upload = new Resumable.Upload(new Blob(["print('mine')\\n"]), { sliceBytes: 4 });
            return await upload.send();
        }"""
    )
    assert ResumableUpload.objects.get(pk=upload_id).complete
    page.context.clear_cookies()
    login(make_user(username="intruder"))
    page.goto("/submit/")
    statuses = page.evaluate(
        """async (id) => {
            const path = `/api/uploads/${id}/`;
            const headers = { "X-CSRFToken": Api.csrfToken(), "Upload-Draft-Interop-Version": "8" };
            const answers = {};
            answers.head = (await fetch(path, { method: "HEAD", headers })).status;
            answers.patch = (await fetch(path, { method: "PATCH", body: "x", headers: {
                ...headers, "Content-Type": "application/partial-upload",
                "Upload-Offset": "0", "Upload-Complete": "?1" } })).status;
            answers.remove = (await fetch(path, { method: "DELETE", headers })).status;
            const json = { upload_id: id, filename: "main.py" };
            try {
                await Api.request("POST", "/api/submissions/", { json });
                answers.create = 201;
            } catch (err) {
                answers.create = `${err.status} ${err.code}`;
            }
            return answers;
        }""",
        upload_id,
    )
    assert statuses == {"head": 404, "patch": 404, "remove": 404, "create": "404 not_found"}
    assert ResumableUpload.objects.get(pk=upload_id).attached_at is None
    assert not Submission.objects.exists()


def test_cancel_stops_the_upload_and_deletes_it(
    page: Any, login: Callable[[User], Any], shots: Callable[[Any, str], Path], tmp_path: Path
) -> None:
    user = make_user(username="quitter")
    login(user)
    (tmp_path / "model.zip").write_bytes(stored_zip(400 * 1024))
    held: list[Any] = []

    def hold_second_patch(route: Any) -> None:
        if (
            route.request.method == "PATCH"
            and len(held) == 0
            and "upload-offset" in (route.request.headers)
            and route.request.headers["upload-offset"] != "0"
        ):
            held.append(route)  # never answered: the request waits until the page cancels
            return
        route.continue_()

    page.route("**/api/uploads/**", hold_second_patch)
    page.goto("/submit/")
    page.set_input_files("#files", str(tmp_path / "model.zip"))
    page.click("#start")
    page.wait_for_selector("#cancel:not([hidden])")
    page.wait_for_function("() => document.getElementById('progress-0').value > 0")
    page.click("#cancel")
    page.wait_for_selector("#message.error:text('Upload cancelled.')")
    assert held
    page.wait_for_selector("#start:not([disabled])")
    for _ in range(50):
        if not ResumableUpload.objects.filter(owner=user).exists():
            break
        page.wait_for_timeout(100)
    assert not ResumableUpload.objects.filter(owner=user).exists()
    assert page.is_hidden("#cancel")
    assert page.inner_text("#status-0") == "cancelled"
    assert Reservation.objects.get(user=user).released_at is not None
    assert not Submission.objects.filter(owner=user).exists()
    shots(page, "submit-resumable-cancelled")
