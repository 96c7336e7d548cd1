"""A real Prometheus scraping a live server (gunicorn, as production runs it) with the alert
rules of deploy/prometheus/alerts.yml loaded: on a healthy server the 5xx share is 0 (not "no
data") while it answers requests, the enqueue-failure counter is 0 for every task, and
every rule evaluates."""

from __future__ import annotations

import json
import math
import os
import shutil
import urllib.parse
import urllib.request
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest

from apps.core.queue import TASKS
from tests.processes import Start, free_port, http_request, start_gunicorn, wait_for

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "prometheus-live-token"
FIVE_XX_SHARE = (
    'sum(rate(yoyaku_http_requests_total{status_class="5xx"}[5m]))'
    " / sum(rate(yoyaku_http_requests_total[5m]))"
)


def _prometheus() -> str:
    found = shutil.which("prometheus")
    if found is None:
        if os.environ.get("YOYAKU_REQUIRE_PROMTOOL"):
            pytest.fail("prometheus is required here (Debian package `prometheus`)")
        pytest.skip("prometheus is not installed (Debian package `prometheus`)")
    return found


def _get(port: int, path: str, **query: str) -> Any:
    url = f"http://127.0.0.1:{port}{path}"
    if query:
        url += "?" + urllib.parse.urlencode(query)
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - loopback
        return json.loads(response.read())


def _query(port: int, expression: str) -> list[dict[str, Any]]:
    answer = _get(port, "/api/v1/query", query=expression)
    assert answer["status"] == "success", answer
    return list(answer["data"]["result"])


@pytest.mark.django_db(transaction=True)
def test_a_healthy_server_gives_prometheus_zeros_for_its_error_series_and_rules(
    start_process: Start, tmp_path: Path
) -> None:
    binary = _prometheus()
    web, _ = start_gunicorn(
        start_process,
        "web",
        1,
        METRICS_TOKEN=TOKEN,
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
    )
    (tmp_path / "metrics").mkdir(exist_ok=True)
    shutil.copy(ROOT / "deploy" / "prometheus" / "alerts.yml", tmp_path / "alerts.yml")
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "rule_files: [alerts.yml]\n"
        "scrape_configs:\n"
        "  - job_name: yoyaku\n"
        "    metrics_path: /metrics\n"
        f"    authorization: {{credentials: {TOKEN}}}\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{web}']}}]\n"
    )
    port = free_port()
    start_process(
        "prometheus",
        [
            binary,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        {"PATH": os.environ.get("PATH", "")},
    )

    def ready() -> bool:
        try:
            targets = _get(port, "/api/v1/targets")["data"]["activeTargets"]
        except OSError:
            return False
        return bool(targets) and targets[0]["health"] == "up"

    wait_for(ready, 60, "prometheus to scrape the server")

    def share_of_5xx() -> float | None:
        """The alert's ratio while the server answers requests (rate() needs two scrapes)."""
        assert http_request(web, "GET", "/api/")[0] == HTTPStatus.OK
        result = _query(port, FIVE_XX_SHARE)
        if not result or math.isnan(float(result[0]["value"][1])):
            return None
        return float(result[0]["value"][1])

    wait_for(lambda: share_of_5xx() is not None, 60, "the 5xx share to have a value")
    assert share_of_5xx() == 0
    failures = _query(port, "yoyaku_task_enqueue_failures_total")
    assert {series["metric"]["task"] for series in failures} == set(TASKS)
    assert {float(series["value"][1]) for series in failures} == {0}

    def evaluated() -> list[dict[str, Any]]:
        groups = _get(port, "/api/v1/rules")["data"]["groups"]
        return [rule for group in groups for rule in group["rules"]]

    wait_for(
        lambda: all(r.get("lastEvaluation", "").startswith("2") for r in evaluated()),
        30,
        "every rule to be evaluated",
    )
    rules = {rule["name"]: rule for rule in evaluated()}
    assert {rule["health"] for rule in rules.values()} == {"ok"}
    assert rules["YoyakuHigh5xxRate"]["state"] == "inactive"
