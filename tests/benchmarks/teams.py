"""Helpers for teams: create, join, leave through the real API."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from rest_framework.test import APIClient

BASE = "/api/challenges/digits/teams/"


def team_create(client: APIClient, name: str) -> Any:
    return client.post(BASE, {"name": name}, format="json")


def team_join(client: APIClient, invite_code: str) -> Any:
    return client.post(f"{BASE}join/", {"invite_code": invite_code}, format="json")


def team_leave(client: APIClient, team_id: str) -> Any:
    return client.post(f"{BASE}{team_id}/leave/")


def team_made(client: APIClient, name: str) -> dict[str, Any]:
    response = team_create(client, name)
    assert response.status_code == HTTPStatus.CREATED, response.json()
    body: dict[str, Any] = response.json()
    return body


def enqueued(client: APIClient, submission_id: str, **body: Any) -> Any:
    return client.post("/api/jobs/", {"submission_id": submission_id, **body}, format="json")
