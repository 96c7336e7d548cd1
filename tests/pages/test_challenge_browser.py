"""The challenge pages in a real Chromium against a live server on loopback: a participant
takes part, joins a team by its code, submits a file through the page, sees the grading
finish and the leaderboard update without a reload, and the day's remaining submissions; a
hidden split says when it is revealed; the host console shows the scorer's logs that the
participant's page never shows, and reveals. Gradings are the worker's task in bubblewrap.
No page logs a console error or has a failed request."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connections
from rest_framework.test import APIClient

from apps.benchmarks.models import Entry
from apps.grading.tasks import grade_job
from apps.jobs.models import Job, JobStatus
from apps.submissions.models import Submission
from tests import faults
from tests.benchmarks.phases import enqueue, participate, submit_to_phase
from tests.benchmarks.scoring import host_user, predictions_csv
from tests.factories.users import make_user
from tests.grading.conftest import sandbox_settings  # noqa: F401 - the fixture
from tests.pages.challenge_support import HIDDEN_ACCURACY, HIDDEN_PRINTED, marked_challenge

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("sandbox_settings"),
]


@pytest.fixture
def problems(page: Any) -> Iterator[list[str]]:
    """Console errors, failed requests and error answers seen by the page; asserted empty."""
    seen: list[str] = []
    page.on("console", lambda m: seen.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: seen.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: seen.append(f"failed: {r.method} {r.url} {r.failure}"))
    page.on(
        "response",
        lambda r: (
            seen.append(f"{r.status}: {r.request.method} {r.url}") if r.status >= 400 else None
        ),
    )
    yield seen
    assert seen == []


def _grade_when_queued(owner: User) -> Job:
    job = Job.objects.get(owner=owner)
    assert job.status == JobStatus.QUEUED
    assert grade_job(job.pk) == "completed"
    return job


def test_a_participant_joins_a_team_submits_and_climbs_the_board(
    page: Any,
    login: Callable[[User], Any],
    shots: Callable[[Any, str], Path],
    problems: list[str],
    client_for: Callable[[User], APIClient],
    tmp_path: Path,
) -> None:
    host = host_user()
    _, marker = marked_challenge(host, per_day=3)
    tia = make_user(username="tia")
    tia_api = client_for(tia)
    assert participate(tia_api) == "approved"
    team = tia_api.post("/api/challenges/digits/teams/", {"name": "Owls"}, format="json")
    assert team.status_code == HTTPStatus.CREATED
    code = team.json()["invite_code"]

    pat = make_user(username="pat")
    login(pat)
    page.goto("/challenges/")
    page.wait_for_selector("tr[data-slug=digits]")
    shots(page, "challenges-list")
    page.click("tr[data-slug=digits] a")
    page.wait_for_selector("#participate")
    page.click("#participate")
    page.wait_for_selector("#invite-code")
    page.fill("#invite-code", code)
    page.click("#team-join")
    page.wait_for_selector("#team-name-shown:text('Owls')")
    assert page.inner_text("#team-members") == "tia, pat"
    # The hidden split's tab says when it is revealed.
    page.click("#tab-dev-private")
    assert "revealed at" in page.inner_text("#panel-dev-private")
    page.click("#tab-dev-public")
    public = page.locator("#panel-dev-public table.board")
    assert public.locator("tr.baseline").count() == 1
    assert public.locator("tr[data-team=Owls]").count() == 0
    shots(page, "challenge-before")

    page.evaluate("() => { window.stillTheSamePage = true; }")
    predictions = tmp_path / "predictions.csv"
    predictions.write_bytes(predictions_csv())
    page.set_input_files("#files-dev", str(predictions))
    page.click("#submit-dev")
    page.wait_for_selector("#phase-dev .submit-status.ok")
    page.wait_for_selector("#phase-dev table.mine tr[data-status=pending]")
    _grade_when_queued(pat)
    # The page polls: the submission finishes, the board gains the team's row, no reload.
    page.wait_for_selector("#phase-dev table.mine tr[data-status=completed]")
    row = page.wait_for_selector("#panel-dev-public tr[data-team=Owls]")
    assert row.inner_text().split("\t")[:3] == ["1", "Owls", "0.9000"]
    assert page.evaluate("() => window.stillTheSamePage") is True
    limits = page.inner_text("#limits-dev")
    assert "2 left today, resets at" in limits
    assert page.get_attribute("#limits-dev time", "datetime").endswith("T00:00:00+00:00")
    counted = page.inner_text("#phase-dev table.mine tr[data-status=completed]")
    assert "counted" in counted
    shots(page, "challenge-after")

    html = page.content()
    assert marker not in html
    assert "scorer says" not in html
    assert repr(HIDDEN_ACCURACY) not in html
    assert HIDDEN_PRINTED not in html


def test_the_host_console_shows_the_scorers_logs_and_reveals(
    page: Any,
    login: Callable[[User], Any],
    shots: Callable[[Any, str], Path],
    problems: list[str],
    client_for: Callable[[User], APIClient],
    browser: Any,
    live_server: Any,
) -> None:
    host = host_user()
    _, marker = marked_challenge(host)
    pat = make_user(username="pat")
    api = client_for(pat)
    assert participate(api) == "approved"
    created = submit_to_phase(api, "dev", [("predictions.csv", predictions_csv())])
    assert grade_job(enqueue(api, created.json()["submission_id"]).json()["job_id"]) == "completed"
    assert Entry.objects.get().counted

    login(host)
    page.goto("/challenges/digits/host/")
    entry = page.wait_for_selector("#host-phase-dev tr[data-submission-id]")
    assert "pat" in entry.inner_text()
    page.click("#host-phase-dev details.scoring-log summary")
    assert f"scorer says {marker}" in page.inner_text("#host-phase-dev details.scoring-log pre")
    assert repr(HIDDEN_ACCURACY) in page.content()
    shots(page, "challenge-host")

    # The participant, meanwhile, reads "revealed at" on the hidden tab.
    other = browser.new_context(
        base_url=live_server.url, viewport={"width": 1200, "height": 900}, timezone_id="Asia/Tokyo"
    )
    try:
        participant = other.new_page()
        participant.goto("/accounts/login/")
        participant.fill("#id_username", "pat")
        participant.fill("#id_password", "pw-for-tests")
        participant.click("button[type=submit]")
        participant.goto("/challenges/digits/")
        participant.click("#tab-dev-private")
        assert "revealed at" in participant.inner_text("#panel-dev-private")
        assert marker not in participant.content()
        # Dates are the viewer's local time (Tokyo), the exact instant in `datetime`.
        reveal = participant.locator("#panel-dev-private time")
        assert reveal.get_attribute("datetime").endswith("+00:00")
        assert "GMT+9" in reveal.inner_text()

        page.click("#reveal-dev")
        page.wait_for_selector("#host-phase-dev:has-text('Hidden splits revealed at')")
        shots(page, "challenge-host-revealed")
        # The participant's open page picks the revealed split up on its next poll.
        participant.wait_for_selector("#panel-dev-private tr[data-team=pat]", state="attached")
        participant.click("#tab-dev-private")
        assert HIDDEN_PRINTED in participant.inner_text("#panel-dev-private")
        shots(participant, "challenge-revealed")

        # A grant of two more today: the console lists it, the participant's page counts it.
        assert "4 left today" in participant.inner_text("#limits-dev")
        page.select_option("#grant-team", label="pat")
        page.select_option("#grant-phase", value="dev")
        page.fill("#grant-extra", "2")
        page.fill("#grant-reason", "lost a day to an outage")
        page.click("#grant-go")
        page.wait_for_selector("#grants td:text('lost a day to an outage')")
        participant.wait_for_selector("#limits-dev:has-text('6 left today')")
        shots(page, "challenge-host-granted")
    finally:
        other.close()


SLOW_PROGRAM = """
import time
print("halfway there", flush=True)
time.sleep(3)
with open("/output/predictions.csv", "w") as out:
    out.write("id,label\\n")
print("done", flush=True)
"""


def _grade_in_thread(job_id: str) -> None:
    """The worker's task in a thread of its own, its database connection closed after."""
    try:
        grade_job(job_id)
    finally:
        connections.close_all()


def test_a_running_programs_log_shows_live_on_the_participants_page(
    page: Any,
    login: Callable[[User], Any],
    shots: Callable[[Any, str], Path],
    problems: list[str],
    client_for: Callable[[User], APIClient],
) -> None:
    host = host_user()
    _, marker = marked_challenge(host)
    pat = make_user(username="pat")
    login(pat)
    page.goto("/challenges/digits/")
    page.click("#participate")
    page.fill("#team-name", "Lynx")
    page.click("#team-create")
    page.wait_for_selector("#team-name-shown:text('Lynx')")
    assert page.inner_text("#team-members") == "pat"
    assert page.inner_text("#invite-code-shown")

    # A program submitted (from a script, as the client does) shows on the open page.
    api = client_for(pat)
    files = [("main.py", SLOW_PROGRAM.encode()), ("config.yaml", b"{}\n")]
    created = submit_to_phase(api, "code", files)
    assert created.status_code == HTTPStatus.CREATED, created.json()
    job_id = enqueue(api, created.json()["submission_id"]).json()["job_id"]
    page.click("#phase-code table.mine tr[data-status=pending] + tr details.run-log summary")
    grading = threading.Thread(target=_grade_in_thread, args=(job_id,))
    grading.start()
    try:
        # One snapshot of the page: the submission still running, its log already there.
        page.wait_for_function(
            """() => {
                const row = document.querySelector("#phase-code table.mine tr[data-status]");
                const log = document.querySelector("#phase-code details.run-log[open] pre");
                return row && row.dataset.status === "processing" && log
                    && log.textContent.includes("halfway there");
            }"""
        )
        shots(page, "challenge-live-log")
    finally:
        grading.join()
    page.wait_for_selector("#phase-code table.mine tr[data-status=completed]")
    page.wait_for_selector("#phase-code details.run-log[open] pre:has-text('done')")
    assert marker not in page.content()
    assert "scorer says" not in page.content()


@pytest.mark.parametrize(
    "path", ["/challenges/", "/challenges/digits/", "/challenges/digits/host/"]
)
def test_the_challenge_pages_fit_a_phone_screen(
    browser: Any,
    live_server: Any,
    shots: Callable[[Any, str], Path],
    client_for: Callable[[User], APIClient],
    path: str,
) -> None:
    host = host_user()
    marked_challenge(host)
    api = client_for(host)
    assert participate(api) == "approved"
    created = submit_to_phase(
        api, "code", [("main.py", SLOW_PROGRAM.encode()), ("config.yaml", b"{}\n")]
    )
    assert grade_job(enqueue(api, created.json()["submission_id"]).json()["job_id"]) == "completed"
    context = browser.new_context(base_url=live_server.url, viewport={"width": 390, "height": 844})
    try:
        phone = context.new_page()
        phone.goto("/accounts/login/")
        phone.fill("#id_username", host.username)
        phone.fill("#id_password", "pw-for-tests")
        phone.click("button[type=submit]")
        phone.goto(path)
        phone.wait_for_selector("main table tbody tr")
        for summary in phone.query_selector_all("details summary"):
            summary.click()
        overflow = phone.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        wide = phone.evaluate(
            """() => Array.from(document.querySelectorAll("main *"))
                .filter((e) => e.getBoundingClientRect().right > window.innerWidth)
                .map((e) => `${e.tagName}.${e.className}`).slice(0, 12)"""
        )
        assert overflow <= 0, f"{path} is {overflow}px wider than a phone screen: {wide}"
        shots(phone, "phone-" + path.strip("/").replace("/", "-"))
    finally:
        context.close()


def test_the_page_retries_a_submission_the_server_answered_503(
    page: Any,
    login: Callable[[User], Any],
    shots: Callable[[Any, str], Path],
    tmp_path: Path,
) -> None:
    """The page's upload is the upload page's: a 5xx is retried with backoff, one submission
    and one job come of it."""
    marked_challenge(host_user())
    pat = make_user(username="pat")
    login(pat)
    page.goto("/challenges/digits/")
    page.click("#participate")
    page.wait_for_selector("#team-name")
    answers: list[int] = []
    page.on(
        "response",
        lambda r: answers.append(r.status) if r.url.endswith("/api/submissions/") else None,
    )
    faults.fail_next(
        lambda request: request.method == "POST" and request.path == "/api/submissions/", times=2
    )
    try:
        predictions = tmp_path / "predictions.csv"
        predictions.write_bytes(predictions_csv())
        page.set_input_files("#files-dev", str(predictions))
        page.click("#submit-dev")
        # The first submission made a team of one: the page reloads to show it.
        page.wait_for_selector("#team-name-shown:text('pat')")
    finally:
        faults.clear()
    assert answers == [503, 503, 201]
    assert Submission.objects.filter(owner=pat).count() == 1
    assert Job.objects.filter(owner=pat).count() == 1
    page.wait_for_selector("#phase-dev table.mine tr[data-status=pending]")
    shots(page, "challenge-after-retries")
