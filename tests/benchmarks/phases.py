"""Helpers for phase submissions: a challenge applied as its host, participants, and
submissions to its phases through the real API."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tests.benchmarks.bundles import bundle, grant_add_challenge
from tests.factories.users import make_user
from tests.submissions.conftest import create_submission

Change = Callable[[dict[str, Any]], None]
PREDICTIONS = b"id,label\n0,3\n1,7\n"
PROGRAM = (("main.py", b"print('hi')\n"), ("config.yaml", b"a: 1\n"))


def phase_times(slug: str, start: str, end: str | None) -> Change:
    """A manifest change: phase `slug` runs from `start` to `end` (None: no end; `reveal`
    then becomes `never`, which needs no end)."""

    def change(document: dict[str, Any]) -> None:
        for phase in document["phases"]:
            if phase["slug"] == slug:
                phase["start"] = start
                if end is None:
                    phase.pop("end", None)
                    phase["reveal"] = "never"
                else:
                    phase["end"] = end

    return change


def settings_of(**values: Any) -> Change:
    def change(document: dict[str, Any]) -> None:
        document.update(values)

    return change


def apply_challenge(
    host_client: APIClient, *changes: Change, expect: HTTPStatus = HTTPStatus.CREATED
) -> None:
    """Apply the example `digits` bundle (phases `dev`: predictions of `.csv` files, and
    `code`), changed by `changes`, as its host (201 created; `expect` 200 for a change)."""

    def change(document: dict[str, Any]) -> None:
        for one in changes:
            one(document)

    response = host_client.post(
        "/api/challenges/", {"bundle": _named(bundle(change))}, format="multipart"
    )
    assert response.status_code == expect, response.json()


def _named(data: bytes) -> Any:
    upload = io.BytesIO(data)
    upload.name = "bundle.zip"
    return upload


def make_host() -> User:
    return grant_add_challenge(make_user(username="hana"))


def participate(client: APIClient, slug: str = "digits") -> str:
    response = client.post(f"/api/challenges/{slug}/participate/")
    assert response.status_code == HTTPStatus.OK, response.json()
    return str(response.json()["status"])


def submit_to_phase(
    client: APIClient,
    phase: str,
    files: Iterable[tuple[str, bytes]] = (("predictions.csv", PREDICTIONS),),
    *,
    challenge: str = "digits",
    fields: Iterable[tuple[str, str]] = (),
) -> Any:
    """POST /api/submissions/ with `challenge` and `phase` as form fields."""
    return create_submission(
        client, files, fields=[("challenge", challenge), ("phase", phase), *fields]
    )


def enqueue(client: APIClient, submission_id: str, **body: Any) -> Any:
    return client.post("/api/jobs/", {"submission_id": submission_id, **body}, format="json")


def phase_limits(slug: str, **limits: int) -> Change:
    """A manifest change: phase `slug`'s team limits are exactly `limits` (none: unlimited)."""

    def change(document: dict[str, Any]) -> None:
        for phase in document["phases"]:
            if phase["slug"] == slug:
                if limits:
                    phase["limits"] = dict(limits)
                else:
                    phase.pop("limits", None)

    return change
