"""A bundle whose participant-facing folders hold the reference data or the scoring program:
`public_data` or `input_data` naming a folder that contains `reference_data` (`data/` around
`data/ref/`), or the scoring program's folder. The contract says no participant and no
participant's program ever sees the reference data; the platform must not let one bundle
line undo that."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.benchmarks.bundles import bundle
from tests.benchmarks.conftest import Apply
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db

PUBLIC_DATA = "/api/challenges/digits/phases/{phase}/public-data/"


def _folders(**fields: str) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        for phase in doc["phases"]:
            phase.update(fields)

    return change


@pytest.mark.parametrize(
    "fields",
    [
        {"public_data": "data/"},
        {"public_data": "data/ref/"},
        {"public_data": "scoring/"},
    ],
    ids=["around-reference", "same-folder", "scoring-program"],
)
def test_public_data_never_holds_the_reference_data(
    host: User,
    apply_as: Callable[[User], Apply],
    client_for: Callable[[User], Any],
    fields: dict[str, str],
) -> None:
    """Today `data/` is applied and the zip holds `ref/labels.csv`."""
    applied = apply_as(host)(bundle(_folders(**fields)))
    assert applied.status_code == HTTPStatus.BAD_REQUEST
    body = applied.json()
    assert body["code"] == "invalid_bundle"
    assert "phases[0].public_data" in body["fields"]
    reader = client_for(make_user(username="reader"))
    assert reader.get(PUBLIC_DATA.format(phase="dev")).status_code == HTTPStatus.NOT_FOUND


def test_public_and_input_data_beside_the_reference_are_served_without_it(
    host: User, apply_as: Callable[[User], Apply], client_for: Callable[[User], Any]
) -> None:
    assert apply_as(host)(bundle()).status_code == HTTPStatus.CREATED
    response = client_for(make_user(username="reader")).get(PUBLIC_DATA.format(phase="dev"))
    assert response.status_code == HTTPStatus.OK
    data = b"".join(response.streaming_content) if response.streaming else response.content
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert names == ["train.csv"]


@pytest.mark.parametrize("folder", ["data/", "data/ref/"])
def test_input_data_never_holds_the_reference_data(
    host: User, apply_as: Callable[[User], Apply], folder: str
) -> None:
    def change(doc: dict[str, Any]) -> None:
        doc["phases"][1]["input_data"] = folder

    applied = apply_as(host)(bundle(change))
    assert applied.status_code == HTTPStatus.BAD_REQUEST, "the bundle was applied"
    assert applied.json()["code"] == "invalid_bundle"
    assert "phases[1].input_data" in applied.json()["fields"]


@pytest.mark.parametrize("field", ["public_data", "input_data"])
def test_the_whole_bundle_is_no_participant_folder(
    host: User, apply_as: Callable[[User], Apply], field: str
) -> None:
    applied = apply_as(host)(bundle(_folders(**{field: "./"})))
    assert applied.status_code == HTTPStatus.BAD_REQUEST
    assert applied.json()["code"] == "invalid_bundle"
