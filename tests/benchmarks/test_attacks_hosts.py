"""Attacks by a host (trusted with their challenge, not with the platform) on another host's
challenge: a dry run under its slug to read its plan, its hosts' list, its reveal and its
participants' approval."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User

from apps.benchmarks.models import Challenge, Participant, Phase
from tests.benchmarks.bundles import bundle, grant_add_challenge
from tests.benchmarks.conftest import Apply
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db

SECRET_TITLE = "Victim's unreleased benchmark"


def _victim(doc: dict[str, Any]) -> None:
    doc["title"] = SECRET_TITLE
    doc["visibility"] = "private"
    doc["participation"] = "approval"


@pytest.fixture
def victim(host: User, apply_as: Callable[[User], Apply]) -> Challenge:
    assert apply_as(host)(bundle(_victim)).status_code == HTTPStatus.CREATED
    return Challenge.objects.get(slug="digits")


def _limits(doc: dict[str, Any]) -> None:
    doc["title"] = "mine now"
    doc["visibility"] = "public"
    for phase in doc["phases"]:
        phase["limits"] = {"per_day": 999}
        phase["reveal"] = "2026-01-01T00:00:00Z"


@pytest.mark.parametrize("dry_run", [True, False])
def test_another_creator_neither_plans_nor_applies_over_a_private_challenge(
    victim: Challenge, apply_as: Callable[[User], Apply], dry_run: bool
) -> None:
    mallory = grant_add_challenge(make_user(username="mallory"))
    response = apply_as(mallory)(bundle(_limits), dry_run=dry_run)
    assert response.status_code == HTTPStatus.FORBIDDEN
    body = response.json()
    assert body["code"] == "permission_denied"
    assert "plan" not in body
    assert SECRET_TITLE not in response.content.decode()
    victim.refresh_from_db()
    assert (victim.title, victim.visibility, victim.bundle_version) == (SECRET_TITLE, "private", 1)
    assert not Phase.objects.filter(challenge=victim, revealed_at__isnull=False).exists()


def test_a_host_of_one_challenge_has_no_power_over_another(
    victim: Challenge, client_for: Callable[[User], Any], apply_as: Callable[[User], Apply]
) -> None:
    other_host = grant_add_challenge(make_user(username="bob"))

    def own(doc: dict[str, Any]) -> None:
        doc["slug"] = "bobs"

    assert apply_as(other_host)(bundle(own)).status_code == HTTPStatus.CREATED
    applicant = make_user(username="applicant")
    Participant.objects.create(challenge=victim, user=applicant, status="pending")
    client = client_for(other_host)
    answers = {
        "hosts-list": client.get("/api/challenges/digits/phases/dev/submissions/"),
        "reveal": client.post("/api/challenges/digits/phases/dev/reveal/"),
        "approve": client.post(f"/api/challenges/digits/participants/{applicant.pk}/approve/"),
        "board": client.get("/api/challenges/digits/phases/dev/leaderboard/?split=private"),
        # the same phase slug in the host's own challenge does not open the other's
        "own-list": client.get("/api/challenges/bobs/phases/dev/submissions/"),
    }
    for door in ("hosts-list", "reveal", "approve", "board"):
        assert answers[door].status_code == HTTPStatus.NOT_FOUND, door
        assert SECRET_TITLE not in answers[door].content.decode()
    assert answers["own-list"].status_code == HTTPStatus.OK
    assert answers["own-list"].json()["count"] == 0
    assert Participant.objects.get(challenge=victim, user=applicant).status == "pending"
    assert not Phase.objects.filter(challenge=victim, revealed_at__isnull=False).exists()
