"""The admin shows challenges read-only: a challenge changes only by applying a bundle."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

from django.contrib.auth.models import User
from django.test import Client

from apps.benchmarks.models import Challenge, Phase
from tests.benchmarks.bundles import bundle
from tests.benchmarks.conftest import Apply


def test_staff_read_challenges_and_phases_but_cannot_add_or_change_them(
    host: User, staff_user: User, apply_as: Callable[[User], Apply], client: Client
) -> None:
    apply_as(host)(bundle())
    client.force_login(staff_user)
    challenge = Challenge.objects.get()
    phase = Phase.objects.get(slug="dev")

    pages = [
        "/admin/benchmarks/challenge/",
        f"/admin/benchmarks/challenge/{challenge.pk}/change/",
        "/admin/benchmarks/phase/",
        f"/admin/benchmarks/phase/{phase.pk}/change/",
        "/admin/benchmarks/participant/",
    ]
    for page in pages:
        assert client.get(page).status_code == HTTPStatus.OK, page
    assert client.get("/admin/benchmarks/challenge/add/").status_code == HTTPStatus.FORBIDDEN
    posted = client.post(
        f"/admin/benchmarks/challenge/{challenge.pk}/change/", {"title": "Changed"}
    )
    assert posted.status_code == HTTPStatus.FORBIDDEN
    assert Challenge.objects.get().title == "Handwritten digits (tiny)"
