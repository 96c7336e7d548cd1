"""GET /metrics: the token, the text format, only `yoyaku_*` metrics, the HTTP metrics."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from django.test import Client

from tests.metrics import TOKEN, parse, scrape

pytestmark = pytest.mark.django_db


def test_without_the_token_is_401_with_a_wrong_one_403_with_it_200(settings: Any) -> None:
    settings.METRICS_TOKEN = TOKEN
    client = Client()
    missing = client.get("/metrics")
    assert missing.status_code == HTTPStatus.UNAUTHORIZED
    assert missing.json()["code"] == "not_authenticated"
    assert missing["WWW-Authenticate"].startswith("Bearer")
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer not-the-token")
    assert wrong.status_code == HTTPStatus.FORBIDDEN
    assert wrong.json()["code"] == "permission_denied"
    other_scheme = client.get("/metrics", HTTP_AUTHORIZATION=f"Token {TOKEN}")
    assert other_scheme.status_code == HTTPStatus.FORBIDDEN
    right = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert right.status_code == HTTPStatus.OK
    assert right["Content-Type"].startswith("text/plain; version=0.0.4")


def test_without_a_token_it_is_open_only_with_debug(settings: Any) -> None:
    settings.METRICS_TOKEN = ""
    settings.DEBUG = False
    refused = Client().get("/metrics")
    assert refused.status_code == HTTPStatus.FORBIDDEN
    assert "METRICS_TOKEN" in refused.json()["error"]
    settings.DEBUG = True
    assert Client().get("/metrics").status_code == HTTPStatus.OK


def test_every_metric_is_named_yoyaku(settings: Any) -> None:
    Client().get("/api/me/")
    families = scrape(settings).families
    assert "yoyaku_http_requests" in families
    assert {name for name in families if not name.startswith("yoyaku_")} == set()


def test_requests_are_counted_by_route_method_and_status_class(settings: Any, user: Any) -> None:
    before = scrape(settings)
    client = Client()
    for _ in range(3):
        client.get("/api/me/")  # 401
    client.get("/api/no/such/path/")  # the API's JSON 404
    client.get("/healthz")
    client.head("/healthz")
    after = scrape(settings)

    def moved(**labels: str) -> float:
        return after.value("yoyaku_http_requests_total", **labels) - before.value(
            "yoyaku_http_requests_total", **labels
        )

    assert moved(route="me", method="GET", status_class="4xx") == 3
    assert moved(route="api-not-found", method="GET", status_class="4xx") == 1
    assert moved(route="healthz", method="GET", status_class="2xx") == 1
    assert moved(route="healthz", method="HEAD", status_class="2xx") == 1
    count = "yoyaku_http_request_duration_seconds_count"
    me_get = {"route": "me", "method": "GET"}
    assert after.value(count, **me_get) - before.value(count, **me_get) == 3
    # The scrape itself is a request too, counted under its own route.
    assert moved(route="metrics", status_class="2xx") == 1


def test_an_unmatched_path_is_one_label_not_one_per_path(settings: Any) -> None:
    before = scrape(settings)
    for n in range(5):
        Client().get(f"/no-such-page-{n}/")
    after = scrape(settings)
    assert "route" in after.text
    assert (
        after.value("yoyaku_http_requests_total", route="unmatched")
        - before.value("yoyaku_http_requests_total", route="unmatched")
        == 5
    )
    assert not any(
        "no-such-page" in value for value in after.labels_of("yoyaku_http_requests_total", "route")
    )


def test_the_exposition_parses_as_prometheus_text(settings: Any) -> None:
    text = scrape(settings).text
    assert parse(text).families
    assert "# TYPE yoyaku_grading_queue_depth gauge" in text
    assert "# TYPE yoyaku_http_request_duration_seconds histogram" in text
