"""Helpers of the challenge page tests: the example bundle applied with its phases open now,
its scorer replaced by one that writes a marker in its log and a recognisable hidden score."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from apps.benchmarks.models import Baseline, Challenge
from apps.benchmarks.tasks import baseline_score
from apps.grading.tasks import grade_job
from tests.benchmarks.phases import enqueue, participate, submit_to_phase
from tests.benchmarks.scoring import apply_bundle, host_user, predictions_csv, scorer_replaced
from tests.factories.users import make_user

#: The hidden split's accuracy the test scorer writes, and how a page would print it.
HIDDEN_ACCURACY = 0.718281828
HIDDEN_PRINTED = "0.7183"


def open_now(document: dict[str, Any]) -> None:
    now = timezone.now()
    for phase in document["phases"]:
        phase["start"] = (now - timedelta(hours=1)).isoformat()
        phase["end"] = (now + timedelta(days=2)).isoformat()


def marked_scorer(marker: str) -> dict[str, bytes]:
    return scorer_replaced(
        f"""
        import json
        from pathlib import Path
        print("scorer says {marker}")
        scores = {{
            "public": {{"accuracy": 0.9, "errors": 1.0}},
            "private": {{"accuracy": {HIDDEN_ACCURACY!r}, "errors": 4.0}},
        }}
        Path("/scores/scores.json").write_text(json.dumps(scores))
        """
    )


def marked_challenge(host: User, *, per_day: int | None = None) -> tuple[Challenge, str]:
    """The example challenge, open now, its scorer and reference data carrying a marker, its
    baselines scored (as the worker does after an apply; needs `sandbox_settings`)."""
    marker = f"hostonly-{secrets.token_hex(6)}"
    extra = {**marked_scorer(marker), f"data/ref/{marker}.txt": marker.encode()}

    def change(document: dict[str, Any]) -> None:
        open_now(document)
        if per_day is not None:
            document["phases"][0]["limits"] = {"per_day": per_day, "concurrent": 2}

    challenge = apply_bundle(host, extra=extra, change=change)
    for baseline in Baseline.objects.filter(phase__challenge=challenge):
        assert baseline_score(baseline.pk) == "scored"
    return challenge, marker


def challenge_with_a_graded_entry(
    client_for: Callable[[User], APIClient],
) -> tuple[User, User, str]:
    """A host's marked challenge where `pat` took part and has one graded submission on the
    `dev` phase: (the host, pat, that submission's id)."""
    host = host_user()
    marked_challenge(host)
    pat = make_user(username="pat")
    api = client_for(pat)
    assert participate(api) == "approved"
    created = submit_to_phase(api, "dev", [("predictions.csv", predictions_csv())])
    submission_id: str = created.json()["submission_id"]
    assert grade_job(enqueue(api, submission_id).json()["job_id"]) == "completed"
    return host, pat, submission_id
