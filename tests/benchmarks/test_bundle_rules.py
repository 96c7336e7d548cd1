"""A bad bundle → 400 `invalid_bundle` with `fields` keyed by YAML path, and nothing stored:
the schema's errors, then each cross-field rule."""

from __future__ import annotations

import json
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings
from django.contrib.auth.models import User

from apps.benchmarks.models import Challenge
from tests.benchmarks.bundles import EXAMPLE, bundle, example_files, zip_bytes
from tests.benchmarks.conftest import Apply

Change = Callable[[dict[str, Any]], None]


def _refused(response: Any) -> dict[str, list[str]]:
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.json()
    assert response.json()["code"] == "invalid_bundle"
    assert not Challenge.objects.exists()
    assert not list((Path(settings.MEDIA_ROOT) / "bundles").rglob("*.zip"))
    fields: dict[str, list[str]] = response.json()["fields"]
    return fields


def _set(path: list[str | int], value: Any) -> Change:
    def change(doc: dict[str, Any]) -> None:
        target: Any = doc
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return change


def _drop(path: list[str | int]) -> Change:
    def change(doc: dict[str, Any]) -> None:
        target: Any = doc
        for part in path[:-1]:
            target = target[part]
        del target[path[-1]]

    return change


SCHEMA_CASES = [
    (
        _set(["phases", 1, "metrics", 0, "direction"], "up"),
        "phases[1].metrics[0].direction",
        "must be max or min",
    ),
    (_set(["slug"], "Digits!"), "slug", "must match ^[a-z0-9-]{1,50}$"),
    (_set(["visibility"], "secret"), "visibility", "must be public, unlisted or private"),
    (_drop(["phases", 0, "primary"]), "phases[0].primary", "is required"),
    (_set(["phases", 0, "colour"], "red"), "phases[0].colour", "is not a known field"),
    (
        _set(["phases", 0, "limits", "per_day"], -1),
        "phases[0].limits.per_day",
        "must be at least 0",
    ),
    (_set(["max_team_size"], "three"), "max_team_size", "must be an integer"),
    (_set(["phases", 0, "metrics"], []), "phases[0].metrics", "must hold at least 1 item"),
    (
        _set(["phases", 0, "metrics", 1, "key"], "Bad-Key"),
        "phases[0].metrics[1].key",
        "must match ^[a-z0-9_]{1,40}$",
    ),
]


@pytest.mark.parametrize(("change", "path", "message"), SCHEMA_CASES)
def test_schema_errors_are_keyed_by_yaml_path(
    host: User, apply_as: Callable[[User], Apply], change: Change, path: str, message: str
) -> None:
    fields = _refused(apply_as(host)(bundle(change)))

    assert fields == {path: [message]}


def test_every_schema_error_is_reported_at_once(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    def two_errors(doc: dict[str, Any]) -> None:
        doc["participation"] = "invite"
        doc["phases"][0]["kind"] = "notebook"

    fields = _refused(apply_as(host)(bundle(two_errors)))

    assert fields == {
        "participation": ["must be open or approval"],
        "phases[0].kind": ["must be predictions or code"],
    }


RULE_CASES = [
    (
        _set(["phases", 0, "primary"], "f1"),
        "phases[0].primary",
        "must name one of the phase's metrics",
    ),
    (
        _set(["phases", 1, "reference_data"], "data/missing/"),
        "phases[1].reference_data",
        "no folder data/missing/ in the bundle",
    ),
    (
        _set(["phases", 0, "scoring_entrypoint"], "run.py"),
        "phases[0].scoring_entrypoint",
        "no file run.py in scoring/",
    ),
    (
        _set(["phases", 0, "baselines"], ["baselines/none/"]),
        "phases[0].baselines[0]",
        "no folder baselines/none/ in the bundle",
    ),
    (
        _set(["phases", 0, "public_data"], "../outside/"),
        "phases[0].public_data",
        "must be a relative folder inside the bundle",
    ),
    (
        _set(["phases", 0, "resources", "timeout"], 100000),
        "phases[0].resources.timeout",
        "must be at most 600 (GRADING_TIMEOUT)",
    ),
    (
        _set(["phases", 0, "resources", "memory_mb"], 999999),
        "phases[0].resources.memory_mb",
        "must be at most 1024 (GRADING_MEMORY_LIMIT)",
    ),
    (_set(["phases", 0, "end"], "2025-01-01T00:00:00Z"), "phases[0].end", "must be after start"),
    (
        _set(["phases", 0, "start"], "2026-01-01T00:00:00"),
        "phases[0].start",
        "must have a UTC offset (Z or +hh:mm)",
    ),
    (
        _set(["phases", 0, "start"], "soon"),
        "phases[0].start",
        "must be an ISO 8601 time, e.g. 2026-12-01T00:00:00Z",
    ),
    (
        _drop(["phases", 0, "end"]),
        "phases[0].reveal",
        "is end, but the phase has no end: give a time or never",
    ),
    (_set(["phases", 1, "slug"], "dev"), "phases[1].slug", "dev is named twice"),
    (
        _set(["phases", 0, "splits"], ["public", "public"]),
        "phases[0].splits[1]",
        "public is named twice",
    ),
    (_set(["hosts"], ["nobody"]), "hosts[0]", "no user named nobody"),
    (_set(["description"], "MISSING.md"), "description", "no file MISSING.md in the bundle"),
    (
        _set(["phases", 0, "reveal"], "tomorrow"),
        "phases[0].reveal",
        "must be an ISO 8601 time, e.g. 2026-12-01T00:00:00Z",
    ),
]


@pytest.mark.parametrize(("change", "path", "message"), RULE_CASES)
def test_each_cross_field_rule_refuses_by_yaml_path(
    host: User, apply_as: Callable[[User], Apply], change: Change, path: str, message: str
) -> None:
    fields = _refused(apply_as(host)(bundle(change)))

    assert fields == {path: [message]}


def test_a_reveal_time_and_no_end_with_only_a_public_split_are_accepted(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    def changed(doc: dict[str, Any]) -> None:
        doc["phases"][0]["reveal"] = "2027-02-01T00:00:00+02:00"
        del doc["phases"][1]["end"]
        doc["phases"][1]["splits"] = ["public"]

    response = apply_as(host)(bundle(changed))

    assert response.status_code == HTTPStatus.CREATED, response.json()
    assert response.json()["phases"][0]["reveal_at"] == "2027-01-31T22:00:00Z"


def test_a_bundle_without_challenge_yaml_is_invalid(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    files = example_files()
    del files["challenge.yaml"]

    fields = _refused(apply_as(host)(zip_bytes(files)))

    assert fields == {"challenge.yaml": ["no file challenge.yaml in the bundle"]}


def test_a_manifest_that_is_not_a_mapping_is_invalid(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    fields = _refused(apply_as(host)(bundle(manifest=b"- just\n- a list\n")))

    assert fields == {"challenge.yaml": ["must be a mapping"]}


def test_json_is_valid_yaml_for_a_manifest(host: User, apply_as: Callable[[User], Apply]) -> None:
    document = yaml.safe_load((EXAMPLE / "challenge.yaml").read_text())
    for phase in document["phases"]:
        for key in ("start", "end"):
            phase[key] = phase[key].isoformat()

    response = apply_as(host)(bundle(manifest=json.dumps(document).encode()))

    assert response.status_code == HTTPStatus.CREATED, response.json()
