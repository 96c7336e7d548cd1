"""Reading challenges (SPEC §11.1): visibility, the public data zip, taking part, approval."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from tests.benchmarks.bundles import EXAMPLE, bundle
from tests.benchmarks.conftest import Apply
from tests.factories.users import make_user

Clients = Callable[[User], APIClient]


def _visibility(value: str, participation: str = "open") -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        doc["visibility"] = value
        doc["participation"] = participation

    return change


def test_challenges_need_authentication(api_client: APIClient, db: None) -> None:
    assert api_client.get("/api/challenges/").status_code == HTTPStatus.UNAUTHORIZED


def test_a_private_challenge_is_a_404_for_others_and_seen_by_its_hosts(
    host: User, other_user: User, apply_as: Callable[[User], Apply], client_for: Clients
) -> None:
    apply_as(host)(bundle(_visibility("private")))
    stranger = client_for(other_user)

    for path in (
        "/api/challenges/digits/",
        "/api/challenges/digits/phases/dev/public-data/",
    ):
        response = stranger.get(path)
        assert response.status_code == HTTPStatus.NOT_FOUND, path
        assert response.json()["code"] == "not_found"
    refused = stranger.post("/api/challenges/digits/participate/")
    assert refused.status_code == HTTPStatus.NOT_FOUND
    assert stranger.get("/api/challenges/").json() == []
    assert client_for(host).get("/api/challenges/digits/").status_code == HTTPStatus.OK
    assert [c["slug"] for c in client_for(host).get("/api/challenges/").json()] == ["digits"]


def test_an_unlisted_challenge_is_readable_by_slug_but_not_listed(
    host: User, other_user: User, apply_as: Callable[[User], Apply], client_for: Clients
) -> None:
    apply_as(host)(bundle(_visibility("unlisted")))
    stranger = client_for(other_user)

    assert stranger.get("/api/challenges/digits/").status_code == HTTPStatus.OK
    assert stranger.get("/api/challenges/").json() == []


def test_the_detail_never_names_reference_data_or_the_scoring_program(
    host: User, other_user: User, apply_as: Callable[[User], Apply], client_for: Clients
) -> None:
    apply_as(host)(bundle())

    body = client_for(other_user).get("/api/challenges/digits/").text

    for secret in ("data/ref", "labels.csv", "scoring/", "score.py", "reference"):
        assert secret not in body


def test_the_public_data_zip_holds_the_public_folder_only(
    host: User, other_user: User, apply_as: Callable[[User], Apply], client_for: Clients
) -> None:
    apply_as(host)(bundle())

    response: Any = client_for(other_user).get("/api/challenges/digits/phases/dev/public-data/")

    assert response.status_code == HTTPStatus.OK
    assert response["Content-Disposition"].startswith("attachment;")
    with zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))) as archive:
        assert archive.namelist() == ["train.csv"]
        assert archive.read("train.csv") == (EXAMPLE / "data/public/train.csv").read_bytes()


def test_a_phase_without_public_data_is_a_404(
    host: User, apply_as: Callable[[User], Apply], client_for: Clients
) -> None:
    def no_public(doc: dict[str, Any]) -> None:
        del doc["phases"][1]["public_data"]

    apply_as(host)(bundle(no_public))

    response = client_for(host).get("/api/challenges/digits/phases/code/public-data/")
    assert response.status_code == HTTPStatus.NOT_FOUND
    missing = client_for(host).get("/api/challenges/digits/phases/nope/public-data/")
    assert missing.status_code == HTTPStatus.NOT_FOUND


def test_an_open_challenge_approves_participants_at_once(
    host: User, other_user: User, apply_as: Callable[[User], Apply], client_for: Clients
) -> None:
    apply_as(host)(bundle())

    first = client_for(other_user).post("/api/challenges/digits/participate/")
    again = client_for(other_user).post("/api/challenges/digits/participate/")

    assert first.status_code == HTTPStatus.OK
    assert first.json()["status"] == "approved"
    assert again.json()["status"] == "approved"


@pytest.mark.parametrize("visibility", ["public", "private"])
def test_an_approval_challenge_waits_for_a_host(
    host: User,
    other_user: User,
    apply_as: Callable[[User], Apply],
    client_for: Clients,
    visibility: str,
) -> None:
    apply_as(host)(bundle(_visibility("unlisted", "approval")))
    asked = client_for(other_user).post("/api/challenges/digits/participate/")
    assert asked.json()["status"] == "pending"
    apply_as(host)(bundle(_visibility(visibility, "approval")))
    approve = f"/api/challenges/digits/participants/{other_user.pk}/approve/"

    refused = client_for(other_user).post(approve)
    approved = client_for(host).post(approve)

    # A stranger to a private challenge learns nothing of it, not even that it exists.
    expected = HTTPStatus.FORBIDDEN if visibility == "public" else HTTPStatus.NOT_FOUND
    assert refused.status_code == expected
    assert approved.status_code == HTTPStatus.OK
    assert approved.json() == {
        "status": "approved",
        "user": {"id": other_user.pk, "username": "bob"},
    }
    # An approved participant sees the challenge, private or not.
    assert client_for(other_user).get("/api/challenges/digits/").status_code == HTTPStatus.OK


def test_a_host_admits_a_user_into_a_private_challenge_they_could_not_see(
    host: User, apply_as: Callable[[User], Apply], client_for: Clients
) -> None:
    apply_as(host)(bundle(_visibility("private", "approval")))
    carol = make_user(username="carol")
    assert client_for(carol).get("/api/challenges/digits/").status_code == HTTPStatus.NOT_FOUND

    response = client_for(host).post(f"/api/challenges/digits/participants/{carol.pk}/approve/")

    assert response.status_code == HTTPStatus.OK
    assert response.json()["status"] == "approved"
    assert client_for(carol).get("/api/challenges/digits/").status_code == HTTPStatus.OK


def test_approving_an_unknown_user_is_a_404(
    host: User, apply_as: Callable[[User], Apply], client_for: Clients
) -> None:
    apply_as(host)(bundle(_visibility("public", "approval")))

    response = client_for(host).post("/api/challenges/digits/participants/999999/approve/")

    assert response.status_code == HTTPStatus.NOT_FOUND
