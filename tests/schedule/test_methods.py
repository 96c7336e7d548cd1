"""An action's HTTP method: the schema names no enum of values that differ only in case
(generated clients make enum members of them), and the API still takes the lower case some
clients send, stored upper."""

from __future__ import annotations

import re
from http import HTTPStatus
from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.schedule.api.serializers import METHODS
from apps.schedule.models import Life
from tests.schedule.conftest import action, point_body

pytestmark = pytest.mark.django_db
URL = "/api/schedules/"


def _enums(node: Any) -> list[list[Any]]:
    if isinstance(node, dict):
        found = [node["enum"]] if isinstance(node.get("enum"), list) else []
        return found + [enum for value in node.values() for enum in _enums(value)]
    if isinstance(node, list):
        return [enum for value in node for enum in _enums(value)]
    return []


def test_no_enum_of_the_schema_holds_two_values_that_differ_only_in_case(
    api_client: APIClient,
) -> None:
    schema = api_client.get("/api/schema/?format=json").json()
    enums = _enums(schema)
    assert enums
    for values in enums:
        folded = [str(v).casefold() for v in values if v is not None]
        assert len(folded) == len(set(folded)), values


def test_the_schemas_method_pattern_admits_every_method_in_both_cases(
    api_client: APIClient,
) -> None:
    schema = api_client.get("/api/schema/?format=json").json()
    method = schema["components"]["schemas"]["ActionRequest"]["properties"]["method"]
    pattern = re.compile(method["pattern"])
    for name in METHODS:
        assert pattern.match(name)
        assert pattern.match(name.lower())
    assert not pattern.match("TRACE")
    assert not pattern.match("GETS")
    assert not pattern.match("Post")


@pytest.mark.parametrize("method", ["post", "POST", "options"])
def test_a_method_in_upper_or_lower_case_is_booked_and_stored_upper(
    user_client: APIClient, method: str
) -> None:
    response = user_client.post(
        URL, {**point_body(), "birth": action(method=method)}, format="json"
    )
    assert response.status_code == HTTPStatus.CREATED, response.json()
    assert response.json()["birth_action"]["method"] == method.upper()


@pytest.mark.parametrize("method", ["TRACE", "CONNECT", "GET ", "Post", "g\x00et", ""])
def test_another_method_is_invalid_schedule(user_client: APIClient, method: str) -> None:
    response = user_client.post(
        URL, {**point_body(), "birth": action(method=method)}, format="json"
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.json()
    assert response.json()["code"] == "invalid_schedule"
    assert Life.objects.count() == 0
