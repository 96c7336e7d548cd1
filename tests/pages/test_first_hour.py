"""What a new user sees in the first hour, in a real Chromium (1280 and 390 px) against a live
server on loopback, and through the test client for the plain answers."""

from __future__ import annotations

from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from apps.jobs.models import Job, JobStatus
from apps.submissions.models import Submission, SubmissionStatus
from tests.factories.jobs import make_job
from tests.factories.submissions import make_submission
from tests.factories.users import make_user
from tests.pages.test_browser_flows import upload

pytestmark = pytest.mark.django_db(transaction=True)
THIRDS = 2 / 3  # 0.6666666666666666 printed raw


@pytest.fixture
def program(tmp_path: Path) -> dict[str, Path]:
    files = {
        "main.py": "import json\njson.dump({'score': 1.0}, open('metrics.json', 'w'))\n",
        "config.yaml": "retries: 1\n",
        "tool.exe": "MZ not really\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return {name: tmp_path / name for name in files}


def finished_job(user: User, score: float | None, question: str = "q1") -> Job:
    status = SubmissionStatus.COMPLETED if score is not None else SubmissionStatus.FAILED
    submission = make_submission(owner=user, question_id=question, status=status, score=score)
    job_status = JobStatus.COMPLETED if score is not None else JobStatus.FAILED
    return make_job(submission, status=job_status)


@pytest.mark.browser
def test_the_submit_page_replaces_job_enqueued_by_the_outcome_and_its_score(
    page: Any, login: Any, shots: Any, program: dict[str, Path]
) -> None:
    user = make_user(username="first")
    login(user)
    upload(page, [program["main.py"], program["config.yaml"]])
    page.wait_for_selector("#enqueue:not([disabled])")
    page.click("#enqueue")
    page.wait_for_selector("#message:text('Job enqueued.')")
    job = Job.objects.get(owner=user)
    # The worker's part, as its result write leaves the rows.
    Submission.objects.filter(pk=job.submission_id).update(
        status=SubmissionStatus.COMPLETED, score=THIRDS
    )
    Job.objects.filter(pk=job.pk).update(status=JobStatus.COMPLETED)
    page.wait_for_selector("#message:text('Job completed. Score 0.6667.')")
    assert "enqueued" not in page.inner_text("#message")
    assert page.inner_text("#job-score") == "0.6667"
    assert page.inner_text("#job-status") == "completed"
    shots(page, "submit-completed")


@pytest.mark.browser
def test_a_refused_files_bar_is_drawn_as_refused(
    page: Any, login: Any, shots: Any, program: dict[str, Path]
) -> None:
    login(make_user(username="refused"))
    upload(page, [program["main.py"], program["tool.exe"]])
    page.wait_for_selector("#message.error")
    refused = page.locator("#file-progress li", has_text="tool.exe")
    assert refused.locator(".error").inner_text() == "refused"
    assert "refused" in (refused.locator("progress").get_attribute("class") or "")
    color = refused.locator("progress").evaluate("e => getComputedStyle(e).accentColor")
    assert color == "rgb(179, 38, 30)"  # --bad, not the accent blue
    shots(page, "submit-refused-bar")


@pytest.mark.browser
def test_scores_are_rounded_on_the_jobs_the_job_and_the_leaderboard_pages(
    page: Any, login: Any, shots: Any
) -> None:
    user = make_user(username="rounder")
    job = finished_job(user, THIRDS, question="q-round")
    login(user)
    page.goto("/jobs/")
    row = page.locator(f"tr[data-job-id='{job.pk}']")
    row.wait_for()
    assert row.locator("td.num").inner_text() == "0.6667"
    assert row.locator("td.num").get_attribute("title") == str(THIRDS)
    shots(page, "jobs-rounded")
    page.goto(f"/jobs/{job.pk}/")
    page.wait_for_selector("#job-meta:has-text('score 0.6667')")
    page.goto("/leaderboard/?question_id=q-round")
    page.wait_for_selector("#board tbody tr")
    assert page.locator("#board tbody td.num").inner_text() == "0.6667"
    shots(page, "leaderboard-rounded")


@pytest.mark.browser
@pytest.mark.parametrize("width", [1280, 390])
def test_the_jobs_table_fits_the_screen_with_jobs_in_it(
    browser: Any, live_server: Any, shots: Any, width: int
) -> None:
    user = make_user(username=f"phone{width}")
    for score in (THIRDS, 1.0, None, 0.123456789):
        finished_job(user, score)
    viewport = {"width": width, "height": 844}
    context = browser.new_context(base_url=live_server.url, viewport=viewport)
    try:
        page = context.new_page()
        page.goto("/accounts/login/")
        page.fill("#id_username", user.username)
        page.fill("#id_password", "pw-for-tests")
        page.click("button[type=submit]")
        page.goto("/jobs/")
        page.wait_for_selector("#jobs tbody tr")
        table = page.evaluate(
            "() => { const t = document.getElementById('jobs');"
            " return [t.scrollWidth, t.parentElement.clientWidth]; }"
        )
        assert table[0] <= table[1], f"the table is {table[0]}px in {table[1]}px"
        overflow = page.evaluate("() => document.documentElement.scrollWidth - innerWidth")
        assert overflow <= 0
        shots(page, f"jobs-{width}")
    finally:
        context.close()


@pytest.mark.browser
@pytest.mark.parametrize("width", [1280, 390])
def test_a_visitor_reads_what_yoyaku_is_under_a_drawn_brand(
    browser: Any, live_server: Any, shots: Any, width: int
) -> None:
    viewport = {"width": width, "height": 844}
    context = browser.new_context(base_url=live_server.url, viewport=viewport)
    try:
        page = context.new_page()
        page.goto("/")
        assert "runs research submissions" in page.inner_text("main")
        assert page.locator("main a[href='/accounts/login/']").count() == 1
        # The 予約 mark is an SVG: no CJK character that a font would have to draw.
        header = page.inner_text("header")
        assert not any("\u3000" <= ch <= "\u9fff" for ch in header), header
        assert page.locator("header .brand svg[aria-label='予約']").count() == 1
        box = page.locator("header .brand svg").bounding_box()
        assert box is not None
        assert box["width"] > 20
        assert page.evaluate("() => document.documentElement.scrollWidth - innerWidth") <= 0
        shots(page, f"home-{width}")
    finally:
        context.close()


@pytest.mark.browser
def test_admin_change_lists_fit_1280_px(browser: Any, live_server: Any, shots: Any) -> None:
    staff = make_user(username="ops", is_staff=True, is_superuser=True)
    for score in (THIRDS, 1.0, None):
        finished_job(staff, score)
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto("/accounts/login/")
        page.fill("#id_username", staff.username)
        page.fill("#id_password", "pw-for-tests")
        page.click("button[type=submit]")
        for path in ("/admin/jobs/job/", "/admin/submissions/submission/"):
            page.goto(path)
            page.wait_for_selector("#result_list")
            cut = page.evaluate(
                "() => { const r = document.querySelector('#changelist .results');"
                " return r.scrollWidth - r.clientWidth; }"
            )
            assert cut <= 0, f"{path}: {cut}px of columns cut off"
            shots(page, "admin" + path.replace("/", "-"))
    finally:
        context.close()


def test_favicon_ico_is_an_icon(client: Client) -> None:
    response = client.get("/favicon.ico")
    assert response.status_code == HTTPStatus.MOVED_PERMANENTLY
    icon = client.get(response["Location"])
    assert icon.status_code == HTTPStatus.OK
    assert b"".join(icon.streaming_content)[:4] == b"\x00\x00\x01\x00"  # type: ignore[attr-defined]


def test_a_signed_in_user_goes_from_the_start_page_to_submit(client: Client) -> None:
    client.force_login(make_user(username="member"))
    response = client.get("/")
    assert response.status_code == HTTPStatus.FOUND
    assert response["Location"] == "/submit/"


def test_the_admin_says_lives(client: Client) -> None:
    client.force_login(make_user(username="root", is_staff=True, is_superuser=True))
    page = client.get("/admin/").content.decode()
    assert "Lives" in page
    assert "Lifes" not in page
