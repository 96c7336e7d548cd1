"""Applying bundles through the API (SPEC §11.1): create, re-apply, update, dry run, who may."""

from __future__ import annotations

import io
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.benchmarks.models import Challenge, Phase
from tests.benchmarks.bundles import bundle, grant_add_challenge
from tests.benchmarks.conftest import Apply
from tests.factories.tokens import make_token
from tests.factories.users import make_user


def _stored_bundles() -> list[Path]:
    return sorted((Path(settings.MEDIA_ROOT) / "bundles").rglob("*.zip"))


def _changes(plan: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [op for op in plan if op["op"] != "unchanged"]


def test_the_example_bundle_creates_the_challenge(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    response = apply_as(host)(bundle())

    assert response.status_code == HTTPStatus.CREATED, response.json()
    body = response.json()
    assert body["slug"] == "digits"
    assert body["bundle_version"] == 1
    assert [p["slug"] for p in body["phases"]] == ["dev", "code"]
    dev = body["phases"][0]
    assert [m["direction"] for m in dev["metrics"]] == ["max", "min"]
    assert dev["splits"] == [
        {"name": "public", "hidden": False},
        {"name": "private", "hidden": True},
    ]
    assert dev["limits"] == {"per_day": 5, "total": 100, "concurrent": 2}
    assert body["hosts"] == [{"id": host.pk, "username": "alice"}]
    assert "<h1>Handwritten digits (tiny)</h1>" in body["description_html"]
    assert "reference_data" not in str(body)
    assert "scoring" not in str(body)
    assert len(_stored_bundles()) == 1


def test_the_same_bytes_again_change_nothing(host: User, apply_as: Callable[[User], Apply]) -> None:
    data = bundle()
    apply_as(host)(data)
    before = Challenge.objects.get().updated_at

    again = apply_as(host)(data)

    assert again.status_code == HTTPStatus.OK
    assert again.json()["bundle_version"] == 1
    assert Challenge.objects.get().updated_at == before
    assert len(_stored_bundles()) == 1


def test_a_changed_limit_is_version_two_and_replaces_the_stored_bundle(
    host: User, apply_as: Callable[[User], Apply], django_capture_on_commit_callbacks: Any
) -> None:
    apply_as(host)(bundle())
    first = Challenge.objects.get().bundle_file

    def per_day(n: int) -> Callable[[dict[str, Any]], None]:
        def change(doc: dict[str, Any]) -> None:
            doc["phases"][0]["limits"]["per_day"] = n

        return change

    with django_capture_on_commit_callbacks(execute=True):
        response = apply_as(host)(bundle(per_day(10)))
    with django_capture_on_commit_callbacks(execute=True):
        third = apply_as(host)(bundle(per_day(11)))

    assert response.status_code == HTTPStatus.OK
    assert response.json()["bundle_version"] == 2
    assert third.json()["bundle_version"] == 3
    assert Phase.objects.get(slug="dev").limit_per_day == 11
    # The first bundle holds scoring version 1's program and reference data: it stays; the
    # second, which no scoring version names, was replaced and removed.
    current = Challenge.objects.get().bundle_file
    root = Path(settings.MEDIA_ROOT)
    assert _stored_bundles() == sorted([root / first, root / current])
    assert Phase.objects.get(slug="dev").scoring_versions.count() == 1


def test_dry_run_of_a_new_challenge_plans_creates_and_changes_nothing(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    response = apply_as(host)(bundle(), dry_run=True)

    assert response.status_code == HTTPStatus.OK
    body = response.json()
    assert body["dry_run"] is True
    assert body["slug"] == "digits"
    assert {op["op"] for op in body["plan"]} == {"create"}
    assert {"phases.dev", "phases.code", "title"} <= {op["path"] for op in body["plan"]}
    assert not Challenge.objects.exists()
    assert _stored_bundles() == []


def test_dry_run_of_a_changed_limit_plans_one_update(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    apply_as(host)(bundle())

    def per_day_ten(doc: dict[str, Any]) -> None:
        doc["phases"][0]["limits"]["per_day"] = 10

    response = apply_as(host)(bundle(per_day_ten), dry_run=True)

    assert _changes(response.json()["plan"]) == [
        {"op": "update", "path": "phases.dev.limits.per_day", "from": 5, "to": 10}
    ]
    assert Phase.objects.get(slug="dev").limit_per_day == 5
    assert Challenge.objects.get().bundle_version == 1


def test_a_dry_run_form_field_plans_too(host: User, apply_as: Callable[[User], Apply]) -> None:
    response = apply_as(host)(bundle(), form={"dry_run": "true"})

    assert response.status_code == HTTPStatus.OK
    assert response.json()["dry_run"] is True
    assert not Challenge.objects.exists()


def test_a_removed_phase_is_planned_as_one_delete_and_then_deleted(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    apply_as(host)(bundle())

    def dev_only(doc: dict[str, Any]) -> None:
        doc["phases"] = doc["phases"][:1]

    plan = apply_as(host)(bundle(dev_only), dry_run=True).json()["plan"]
    assert [(op["op"], op["path"]) for op in _changes(plan)] == [("delete", "phases.code")]

    assert apply_as(host)(bundle(dev_only)).json()["bundle_version"] == 2
    assert list(Phase.objects.values_list("slug", flat=True)) == ["dev"]


def test_creating_needs_the_add_challenge_permission(
    other_user: User, apply_as: Callable[[User], Apply]
) -> None:
    response = apply_as(other_user)(bundle())

    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["code"] == "permission_denied"
    assert not Challenge.objects.exists()
    assert _stored_bundles() == []


def test_only_hosts_or_staff_change_a_challenge(
    host: User, staff_user: User, apply_as: Callable[[User], Apply]
) -> None:
    apply_as(host)(bundle())
    creator = grant_add_challenge(make_user(username="carol"))

    def retitled(doc: dict[str, Any]) -> None:
        doc["title"] = "Renamed"

    refused = apply_as(creator)(bundle(retitled))
    assert refused.status_code == HTTPStatus.FORBIDDEN
    assert refused.json()["code"] == "permission_denied"
    assert Challenge.objects.get().title == "Handwritten digits (tiny)"

    accepted = apply_as(staff_user)(bundle(retitled))
    assert accepted.status_code == HTTPStatus.OK
    assert accepted.json()["title"] == "Renamed"


def test_a_named_host_may_change_it_and_the_hosts_become_the_bundles_plus_the_uploader(
    host: User, other_user: User, apply_as: Callable[[User], Apply]
) -> None:
    def with_bob(doc: dict[str, Any]) -> None:
        doc["hosts"] = ["bob"]

    apply_as(host)(bundle(with_bob))

    def retitled(doc: dict[str, Any]) -> None:
        doc["hosts"] = ["bob"]
        doc["title"] = "By bob"

    response = apply_as(other_user)(bundle(retitled))
    assert response.status_code == HTTPStatus.OK
    # Configuration as code: alice is no longer named, and bob applied it.
    assert {h["username"] for h in response.json()["hosts"]} == {"bob"}


def test_an_unknown_upload_id_is_not_found(
    host: User, client_for: Callable[[User], APIClient]
) -> None:
    response = client_for(host).post("/api/challenges/", {"upload_id": "a" * 32}, format="json")

    assert response.status_code == HTTPStatus.NOT_FOUND
    assert response.json()["code"] == "not_found"


def test_a_post_without_a_bundle_is_invalid_bundle(
    host: User, client_for: Callable[[User], APIClient]
) -> None:
    response = client_for(host).post("/api/challenges/", {}, format="multipart")

    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_bundle"
    assert response.json()["fields"] == {"bundle": ["is required"]}


def test_a_token_without_the_host_scope_cannot_apply_a_bundle(host: User) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token(host, scopes=['submit', 'read'])}")

    response = client.post("/api/challenges/", {"bundle": io.BytesIO(bundle())}, format="multipart")

    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["code"] == "insufficient_scope"
    assert not Challenge.objects.exists()
