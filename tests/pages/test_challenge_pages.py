"""The challenge pages through the test client: who sees which page, search and status, and
the host's secrets (the scorer's log, the reference data, hidden scores before the reveal) on
the host console and never on a participant's page, with real gradings in bubblewrap."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import timedelta
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.benchmarks.models import Phase, Rescore, RescoreState
from apps.benchmarks.services.rescoring import rescore_next
from apps.benchmarks.services.reveal import phase_reveal
from apps.grading.tasks import grade_job
from tests.benchmarks.phases import enqueue, participate, submit_to_phase
from tests.benchmarks.rescoring import CRASHING_SCORER, new_scorer
from tests.benchmarks.scoring import (
    apply_bundle,
    host_user,
    perfect_program,
    predictions_csv,
    scorer_replaced,
)
from tests.factories.users import make_user
from tests.grading.conftest import sandbox_settings  # noqa: F401 - the fixture
from tests.pages.challenge_support import (
    HIDDEN_ACCURACY,
    HIDDEN_PRINTED,
    challenge_with_a_graded_entry,
    marked_challenge,
    open_now,
)

pytestmark = pytest.mark.django_db


def _page(user: User | None, path: str) -> str:
    client = Client()
    if user is not None:
        client.force_login(user)
    response = client.get(path)
    assert response.status_code == HTTPStatus.OK, (path, response.status_code)
    assert "Content-Security-Policy" in response
    return response.content.decode()


def _shift(document: dict[str, Any], *, starts_in: timedelta, ends_in: timedelta) -> None:
    now = timezone.now()
    for phase in document["phases"]:
        phase["start"] = (now + starts_in).isoformat()
        phase["end"] = (now + ends_in).isoformat()


def test_the_list_searches_and_filters_by_status() -> None:
    host = host_user()
    apply_bundle(host, change=open_now)  # digits: open
    for slug, starts, ends in (("later", 1, 2), ("done", -3, -1)):

        def change(document: dict[str, Any], slug: str = slug, s: int = starts, e: int = ends):
            document["slug"] = slug
            document["title"] = f"Challenge {slug}"
            _shift(document, starts_in=timedelta(days=s), ends_in=timedelta(days=e))

        apply_bundle(host, change=change)
    viewer = make_user(username="viewer")

    def listed(query: str) -> list[str]:
        html = _page(viewer, "/challenges/" + query)
        return [s for s in ("digits", "later", "done") if f'data-slug="{s}"' in html]

    assert listed("") == ["digits", "later", "done"]
    assert listed("?status=open") == ["digits"]
    assert listed("?status=upcoming") == ["later"]
    assert listed("?status=closed") == ["done"]
    assert listed("?q=LAT") == ["later"]
    assert listed("?q=digits&status=closed") == []
    assert listed("?status=nonsense&q=" + "x" * 500) == []


def test_unknown_private_and_foreign_host_pages_are_refused() -> None:
    host = host_user()
    apply_bundle(host, change=open_now)
    stranger = make_user(username="stranger")
    client = Client()
    client.force_login(stranger)
    assert client.get("/challenges/nope/").status_code == HTTPStatus.NOT_FOUND
    assert client.get("/challenges/digits/host/").status_code == HTTPStatus.FORBIDDEN
    assert client.get("/challenges/digits/fragments/board/?phase=zz").status_code == 404
    assert client.get("/challenges/digits/fragments/mine/?phase=dev").status_code == 404
    assert client.post("/challenges/digits/").status_code == HTTPStatus.METHOD_NOT_ALLOWED
    assert Client().get("/challenges/digits/host/").status_code == HTTPStatus.FORBIDDEN
    host_client = Client()
    host_client.force_login(host)
    assert host_client.get("/challenges/digits/host/").status_code == HTTPStatus.OK


@pytest.mark.usefixtures("sandbox_settings")
def test_the_hosts_secrets_reach_the_host_console_and_never_a_participants_page(
    client_for: Callable[[User], APIClient],
) -> None:
    host = host_user()
    _, marker = marked_challenge(host)
    pat = make_user(username="pat")
    api = client_for(pat)
    assert participate(api) == "approved"
    for phase, files in (
        ("dev", [("predictions.csv", predictions_csv())]),
        ("code", list(perfect_program().items())),
    ):
        created = submit_to_phase(api, phase, files)
        assert created.status_code == HTTPStatus.CREATED, created.json()
        job = enqueue(api, created.json()["submission_id"]).json()["job_id"]
        assert grade_job(job) == "completed"

    participant_pages = [
        _page(pat, "/challenges/digits/"),
        *(
            _page(pat, f"/challenges/digits/fragments/{part}/?phase={phase}")
            for part in ("board", "mine")
            for phase in ("dev", "code")
        ),
        _page(pat, "/challenges/"),
    ]
    detail = participant_pages[0]
    # What the participant may see is there: the public scores, the run's own log, the
    # hidden split's reveal time, the limits.
    assert "0.9000" in detail
    assert "predicted" in detail  # the code phase's program printed "predicted N rows"
    assert "revealed at" in detail
    assert "left today" in detail
    for html in participant_pages:
        assert marker not in html
        assert "scorer says" not in html
        assert repr(HIDDEN_ACCURACY) not in html
        assert HIDDEN_PRINTED not in html

    console = _page(host, "/challenges/digits/host/")
    assert f"scorer says {marker}" in console
    assert repr(HIDDEN_ACCURACY) in console
    assert "predicted" in console

    # After the reveal the hidden scores are the participant's to read: the check above was
    # about the reveal, not about a page that never shows that split.
    phase_reveal(phase_id=Phase.objects.get(slug="dev").pk, via="host")
    revealed = _page(pat, "/challenges/digits/")
    assert HIDDEN_PRINTED in revealed
    assert marker not in revealed


def test_the_description_is_markdown_without_raw_html_or_script_links() -> None:
    readme = (
        b"# Title\n\nSome **bold** text and [a link](https://example.org/x).\n\n"
        b"<script>alert('raw')</script>\n\n<img src=x onerror=alert(1)>\n\n"
        b"[click](javascript:alert(2)) and [data](data:text/html,<b>x</b>)\n"
    )
    apply_bundle(host_user(), extra={"README.md": readme}, change=open_now)
    html = _page(make_user(username="reader"), "/challenges/digits/")
    description = html.split('aria-label="Description">', 1)[1].split("</section>", 1)[0]
    assert "<strong>bold</strong>" in description
    assert 'href="https://example.org/x"' in description
    assert 'rel="noopener noreferrer"' in description
    # Raw HTML is text, never markup; script and data links are no links.
    for markup in ("<script", "<img", 'href="javascript:', 'href="data:'):
        assert markup not in description
    assert "&lt;script&gt;" in description


@pytest.mark.usefixtures("sandbox_settings")
def test_a_crashed_scorer_is_a_refund_the_participant_reads_without_the_scorers_output(
    client_for: Callable[[User], APIClient],
) -> None:
    host = host_user()
    marker = "crash-trace-" + secrets.token_hex(6)
    crash = f"import sys\nprint('{marker}', file=sys.stderr)\nraise SystemExit(3)\n"
    apply_bundle(host, extra=scorer_replaced(crash), change=open_now)
    pat = make_user(username="pat")
    api = client_for(pat)
    assert participate(api) == "approved"
    created = submit_to_phase(api, "dev", [("predictions.csv", predictions_csv())])
    job = enqueue(api, created.json()["submission_id"]).json()["job_id"]
    assert grade_job(job) == "failed"

    mine = _page(pat, "/challenges/digits/fragments/mine/?phase=dev")
    assert "refunded: scoring_failed" in mine
    assert "5 left today" in mine  # the refund gave the day's slot back
    assert marker not in mine
    assert marker not in _page(pat, "/challenges/digits/")
    console = _page(host, "/challenges/digits/host/")
    assert marker in console
    refunds = console.split('id="refunds"', 1)[1].split("</section>", 1)[0]
    assert created.json()["submission_id"][:12] in refunds
    assert "scoring_failed" in refunds


@pytest.mark.parametrize("public", [True, False])
def test_a_visitor_reads_a_public_challenge_and_its_boards_as_the_api_allows(
    settings: Any, public: bool
) -> None:
    settings.LEADERBOARD_PUBLIC = public
    apply_bundle(host_user(), change=open_now)
    html = _page(None, "/challenges/digits/")
    assert "Log in</a> to take part" in html
    assert 'id="participate"' not in html
    board = _page(None, "/challenges/digits/fragments/board/?phase=dev")
    assert ("No scores yet." in board) is public
    assert ("Log in to read this leaderboard." in board) is not public
    assert 'data-slug="digits"' in _page(None, "/challenges/")


@pytest.mark.usefixtures("sandbox_settings")
def test_the_host_console_shows_a_running_rescores_progress_and_failures_to_hosts_only(
    client_for: Callable[[User], APIClient], settings: Any
) -> None:
    settings.RESCORE_BATCH = 1  # one item per call of the worker's service, as a busy queue does
    host, pat, submission_id = challenge_with_a_graded_entry(client_for)
    quiet = _page(host, "/challenges/digits/host/")
    assert "No rescore yet" in quiet.split('id="rescore-dev"', 1)[1]

    # Version 2 crashes: one of its two items (the entry, then the baseline) is taken and
    # fails; the other is still pending, so the rescore runs and the board serves version 1.
    new_scorer(host, body=CRASHING_SCORER)
    rescore = Rescore.objects.get(phase__slug="dev", version=2)
    assert rescore_next(rescore_id=rescore.pk) == "failed"
    assert Rescore.objects.get(pk=rescore.pk).state == RescoreState.RUNNING

    console = _page(host, "/challenges/digits/host/")
    section = console.split('id="rescore-dev"', 1)[1].split("</section>", 1)[0]
    fragment = _page(host, "/challenges/digits/host/fragments/rescore/?phase=dev")
    for html in (section, fragment):
        assert 'data-state="running"' in html
        assert 'class="rescore-serving">1<' in html
        assert 'class="rescore-version">2<' in html
        assert '<progress id="rescore-progress-dev" value="0" max="2">' in html
        assert "0 done, 1 failed, 2 in all" in html
        assert submission_id[:12] in html
        assert "scoring_failed" in html
        assert "Retry failures" in html
        assert "Cancel rescore" in html

    participant_pages = [
        _page(pat, "/challenges/digits/"),
        _page(pat, "/challenges/digits/fragments/board/?phase=dev"),
        _page(pat, "/challenges/digits/fragments/mine/?phase=dev"),
    ]
    for html in participant_pages:
        assert "rescore" not in html.lower()
        assert "scoring_failed" not in html
    participant = Client()
    participant.force_login(pat)
    fragment_path = "/challenges/digits/host/fragments/rescore/?phase=dev"
    assert participant.get(fragment_path).status_code == HTTPStatus.FORBIDDEN
    assert Client().get(fragment_path).status_code == HTTPStatus.FORBIDDEN
    host_client = Client()
    host_client.force_login(host)
    unknown = "/challenges/digits/host/fragments/rescore/?phase=nope"
    assert host_client.get(unknown).status_code == HTTPStatus.NOT_FOUND
