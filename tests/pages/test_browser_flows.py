"""The pages in a real Chromium against a live server on loopback: what a person does."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from apps.jobs.models import Job
from apps.quotas.models import Reservation
from apps.review.services.review import review_claim
from apps.submissions.models import Submission, SubmissionFile, SubmissionStatus
from tests import faults
from tests.factories.submissions import add_file
from tests.factories.users import make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _no_faults() -> Any:
    faults.clear()
    yield
    faults.clear()


@pytest.fixture
def program(tmp_path: Path) -> dict[str, Path]:
    files = {
        "main.py": "import json\njson.dump({'score': 1.0}, open('metrics.json', 'w'))\n",
        "config.yaml": "seed: 1\n",
        "helper.py": "VALUE = 42\n",
        "tool.exe": "MZ not really\n",
    }
    folder = tmp_path / "upload"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return {name: folder / name for name in files}


def upload(page: Any, paths: list[Path], question: str = "q1") -> None:
    page.goto("/submit/")
    page.set_input_files("#files", [str(p) for p in paths])
    page.fill("#question_id", question)
    page.fill("#skill", "reading")
    page.click("#start")


def test_three_files_upload_and_enqueue_one_job(page, login, shots, program) -> None:
    user = make_user(username="uploader")
    login(user)
    upload(page, [program["main.py"], program["config.yaml"], program["helper.py"]])

    page.wait_for_selector("#overall-text:text('3/3 files uploaded')")
    page.wait_for_selector("#enqueue:not([disabled])")
    shots(page, "submit-uploaded")
    submission = Submission.objects.get(owner=user)
    assert [f.filename for f in SubmissionFile.objects.filter(submission=submission)] == [
        "main.py",
        "config.yaml",
        "helper.py",
    ]

    page.click("#enqueue")
    page.wait_for_selector("#job:not([hidden])")
    job = Job.objects.get(owner=user)
    assert page.inner_text("#job-id") == job.pk
    assert job.submission_id == submission.pk
    # The page's reservation became the job's slot.
    reservation = Reservation.objects.get(user=user)
    assert reservation.consumed_at is not None
    assert reservation.job_id == job.pk
    shots(page, "submit-enqueued")

    page.goto("/jobs/")
    page.wait_for_selector(f"tr[data-job-id='{job.pk}']")
    shots(page, "jobs-page")
    page.goto(f"/jobs/{job.pk}/")
    page.wait_for_selector("#job-status:text('queued')")
    shots(page, "job-detail")


def test_server_errors_are_retried_and_the_upload_succeeds(page, login, shots, program) -> None:
    user = make_user(username="retrier")
    login(user)
    seen: list[int] = []
    page.on(
        "response",
        lambda r: seen.append(r.status) if r.url.endswith("/files/") else None,
    )
    faults.fail_next(
        lambda request: request.method == "POST" and request.path.endswith("/files/"), times=2
    )
    upload(page, [program["main.py"], program["config.yaml"]])

    page.wait_for_selector("#overall-text:text('2/2 files uploaded')")
    assert seen == [503, 503, 201]
    assert SubmissionFile.objects.filter(submission__owner=user).count() == 2
    shots(page, "submit-after-retries")


def test_a_refused_file_stops_the_upload_and_releases_the_slot(page, login, shots, program) -> None:
    user = make_user(username="exe")
    login(user)
    refusals: list[dict[str, Any]] = []
    page.on(
        "response",
        lambda r: refusals.append(r.json()) if r.status == 400 else None,
    )
    upload(page, [program["main.py"], program["tool.exe"], program["config.yaml"]])

    page.wait_for_selector("#message.error")
    assert refusals
    assert refusals[0]["code"] == "invalid_extension"
    assert page.inner_text("#message") == refusals[0]["error"]
    assert page.is_disabled("#enqueue")
    # The third file was never sent, and the reserved slot was given back.
    assert list(
        SubmissionFile.objects.filter(submission__owner=user).values_list("filename", flat=True)
    ) == ["main.py"]
    reservation = Reservation.objects.get(user=user)
    for _ in range(50):
        reservation.refresh_from_db()
        if reservation.released_at is not None:
            break
        page.wait_for_timeout(100)
    assert reservation.released_at is not None
    shots(page, "submit-refused")


def test_double_click_on_enqueue_makes_one_job(page, login, program) -> None:
    user = make_user(username="clicker")
    login(user)
    upload(page, [program["main.py"], program["config.yaml"]])
    page.wait_for_selector("#enqueue:not([disabled])")

    page.dblclick("#enqueue")
    # Even two handler runs at once (the button forced back on) share the intent's key.
    page.evaluate(
        "() => { const b = document.getElementById('enqueue'); b.disabled = false; b.click(); }"
    )
    page.wait_for_selector("#job:not([hidden])")
    page.wait_for_timeout(1500)
    assert Job.objects.filter(owner=user).count() == 1


def _review_pending(owner: User) -> Submission:
    return Submission.objects.create(
        owner=owner,
        status=SubmissionStatus.REVIEW_PENDING,
        question_id="q9",
        skill="math",
        score=0.5,
    )


def test_review_page_shows_who_holds_a_claim(page, login, shots) -> None:
    first = make_user(username="rita", reviewer=True)
    second = make_user(username="sam", reviewer=True)
    submission = _review_pending(make_user(username="author"))
    review_claim(user=first, submission_id=submission.pk)

    login(second)
    page.goto("/review/")
    row = page.wait_for_selector(f"tr[data-submission-id='{submission.pk}']")
    assert "rita" in row.inner_text()
    row.query_selector(".claim-button").click()
    page.wait_for_selector("#message.error")
    assert "Already claimed by rita" in page.inner_text("#message")
    shots(page, "review-conflict")


def test_reviewer_claims_and_approves(page, login, shots) -> None:
    reviewer = make_user(username="vera", reviewer=True)
    submission = _review_pending(make_user(username="writer"))
    add_file(submission, "main.py", b"print('the answer is 42')\n")
    login(reviewer)
    page.goto("/review/")
    page.wait_for_selector(f"tr[data-submission-id='{submission.pk}'] .claim-button").click()
    page.wait_for_selector("#claim-panel:not([hidden])")
    # The verdict is not given blind: the submission's files are on the page.
    page.wait_for_selector("#detail-files details")
    page.click("#detail-files summary")
    assert "the answer is 42" in page.inner_text("#detail-files")
    page.fill("#score", "0.9")
    page.fill("#comment", "Looks right.")
    shots(page, "review-claimed")
    page.click("#complete")
    page.wait_for_selector(f"#message:text('Review of {submission.pk} recorded')")
    # The queue reloads empty; the confirmation stays where the reviewer reads it.
    page.wait_for_selector("#queue td:text('Nothing waits for review.')")
    assert f"Review of {submission.pk} recorded" in page.inner_text("#message")
    submission.refresh_from_db()
    assert submission.status == SubmissionStatus.COMPLETED
    assert submission.score == 0.9

    page.goto("/leaderboard/?question_id=q9&skill=math")
    page.wait_for_selector("#board tbody tr")
    assert "writer" in page.inner_text("#board")
    shots(page, "leaderboard")


@pytest.mark.parametrize("path", ["/submit/", "/jobs/", "/leaderboard/", "/review/"])
def test_pages_fit_a_phone_screen(browser, live_server, path: str, shots) -> None:
    user = make_user(username="phone", reviewer=True)
    context = browser.new_context(base_url=live_server.url, viewport={"width": 390, "height": 844})
    try:
        phone = context.new_page()
        phone.goto("/accounts/login/")
        phone.fill("#id_username", user.username)
        phone.fill("#id_password", "pw-for-tests")
        phone.click("button[type=submit]")
        phone.goto(path)
        phone.wait_for_load_state("networkidle")
        overflow = phone.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{path} is {overflow}px wider than a phone screen"
        shots(phone, "phone" + path.strip("/").replace("/", "-"))
    finally:
        context.close()


def test_review_page_lists_archive_members_and_downloads_every_file(page, login, shots) -> None:
    """A reviewer sees what is inside an archive and can download any file, a binary over
    64 KiB included, byte for byte; a member's name is shown as text, never as markup."""
    reviewer = make_user(username="wendy", reviewer=True)
    submission = _review_pending(make_user(username="uploader"))
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w") as archive:
        archive.writestr("answers/q1.txt", "42\n")
        archive.writestr("<img src=x onerror=alert(1)>.txt", "markup?\n")
    add_file(submission, "answers.zip", packed.getvalue())
    blob = bytes(range(256)) * 400  # 100 KiB of binary: not shown inline
    add_file(submission, "weights.bin", blob)
    add_file(submission, "main.py", b"print('hi')\n")

    login(reviewer)
    page.goto("/review/")
    page.wait_for_selector(f"tr[data-submission-id='{submission.pk}'] .claim-button").click()
    page.wait_for_selector("#detail-files details")
    for summary in page.query_selector_all("#detail-files summary"):
        summary.click()
    members = page.inner_text("#detail-files table.members")
    assert "answers/q1.txt" in members
    assert "<img src=x onerror=alert(1)>.txt" in members
    assert page.query_selector("#detail-files img") is None
    shots(page, "review-members")

    binary = page.wait_for_selector("#detail-files details:has-text('weights.bin') a.download")
    with page.expect_download() as caught:
        binary.click()
    saved = Path(caught.value.path())
    assert saved.read_bytes() == blob
