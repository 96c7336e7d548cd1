"""The hosts' console's rescore section in a real Chromium against a live server: while a
rescore runs the section polls its progress (an item scored by the worker's service shows up
without a reload), and "Cancel rescore" stops it through the rescore API while the
leaderboard keeps serving the version it served. No console error, no failed request."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.benchmarks.models import Phase, Rescore, RescoreState
from apps.benchmarks.services.rescoring import rescore_next
from tests.benchmarks.rescoring import new_scorer, rescore_all
from tests.grading.conftest import sandbox_settings  # noqa: F401 - the fixture
from tests.pages.challenge_support import challenge_with_a_graded_entry
from tests.pages.test_challenge_browser import problems  # noqa: F401 - the fixture

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("sandbox_settings"),
]


def test_the_console_polls_a_rescore_and_cancel_keeps_the_served_version(
    page: Any,
    login: Callable[[User], Any],
    shots: Callable[[Any, str], Path],
    problems: list[str],  # noqa: F811 - the fixture
    client_for: Callable[[User], APIClient],
    settings: Any,
) -> None:
    settings.RESCORE_BATCH = 1  # one item per call of the worker's service, as a busy queue does
    host, pat, _ = challenge_with_a_graded_entry(client_for)
    new_scorer(host)  # version 2: the entry and the baseline to score again
    rescore = Rescore.objects.get(phase__slug="dev", version=2)

    login(host)
    page.goto("/challenges/digits/host/")
    section = "#rescore-dev"
    page.wait_for_selector(f"{section} .rescore[data-state=running]")
    assert page.inner_text(f"{section} .rescore-serving") == "1"
    assert page.inner_text(f"{section} .rescore-version") == "2"
    assert page.get_attribute(f"{section} progress", "value") == "0"
    page.evaluate("() => { window.stillTheSamePage = true; }")

    # The worker's service scores one item; the open page shows it on its next poll.
    assert rescore_next(rescore_id=rescore.pk) == "done"
    page.wait_for_selector(f"{section} progress[value='1'][max='2']")
    assert "1 done, 0 failed, 2 in all" in page.inner_text(section)
    assert page.evaluate("() => window.stillTheSamePage") is True
    shots(page, "challenge-host-rescore-running")

    page.click(f"{section} .rescore-cancel")
    page.wait_for_selector(f"{section} .rescore[data-state=cancelled]")
    assert page.inner_text(f"{section} .rescore-state") == "cancelled"
    assert page.locator(f"{section} .rescore-cancel").count() == 0
    assert "cancelled" in page.inner_text("#message")
    shots(page, "challenge-host-rescore-cancelled")

    # The cancelled rescore's last item is never taken; the board still serves version 1.
    assert Rescore.objects.get(pk=rescore.pk).state == RescoreState.CANCELLED
    assert rescore_all(rescore.pk) == ["idle"]
    assert Phase.objects.get(slug="dev").scoring_version == 1
    board = client_for(pat).get("/api/challenges/digits/phases/dev/leaderboard/")
    assert board.json()["scoring_version"] == 1
    page.reload()
    assert page.inner_text(f"{section} .rescore-serving") == "1"
    assert page.inner_text(f"{section} .rescore-state") == "cancelled"
