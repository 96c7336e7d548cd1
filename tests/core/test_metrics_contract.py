"""The alert rules and the dashboard name only metrics that a real scrape exposes, and the
rules are valid for Prometheus (`promtool check rules`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client

from apps.core.services import heartbeat_beat
from tests.metrics import scrape

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "yoyaku.json"
METRIC = re.compile(r"\byoyaku_[a-z0-9_]+")
SUFFIXES = ("_bucket", "_count", "_sum")


def _expressions_of_rules() -> list[str]:
    rules = yaml.safe_load(ALERTS.read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def _expressions_of_dashboard() -> list[str]:
    def walk(node: Any) -> list[str]:
        if isinstance(node, dict):
            found = [node["expr"]] if isinstance(node.get("expr"), str) else []
            return found + [e for value in node.values() for e in walk(value)]
        if isinstance(node, list):
            return [e for item in node for e in walk(item)]
        return []

    return walk(json.loads(DASHBOARD.read_text()))


def _sample_names(expressions: list[str]) -> set[str]:
    return {name for expression in expressions for name in METRIC.findall(expression)}


@pytest.mark.django_db
def test_every_metric_of_the_rules_and_the_dashboard_is_in_a_real_scrape(settings: Any) -> None:
    # The least a running platform has done: answered a request, heard from a watcher.
    Client().get("/api/me/")
    heartbeat_beat(name="watcher")
    heartbeat_beat(name="watcher:contract-test")
    exposed = scrape(settings)
    rules, dashboard = _expressions_of_rules(), _expressions_of_dashboard()
    assert len(rules) >= 8
    assert len(dashboard) >= 30
    named = _sample_names(rules) | _sample_names(dashboard)
    missing = sorted(name for name in named if not exposed.has_sample(name))
    assert missing == []
    # Histograms are used through their series, never by a bare family name.
    bare_histograms = sorted(
        name
        for name in named
        if not name.endswith(SUFFIXES) and exposed.has_sample(f"{name}_bucket")
    )
    assert bare_histograms == []


def test_the_dashboard_has_a_row_per_app() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    rows = [panel["title"] for panel in dashboard["panels"] if panel["type"] == "row"]
    assert rows == [
        "HTTP",
        "Submissions and uploads",
        "Jobs and quotas",
        "Grading",
        "Review",
        "Schedule",
    ]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_the_seed_s_two_alerts_and_the_issue_s_five_are_defined() -> None:
    rules = yaml.safe_load(ALERTS.read_text())
    names = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    assert {
        "YoyakuHigh5xxRate",
        "YoyakuRetryFailureRateHigh",
        "YoyakuWatcherHeartbeatStale",
        "YoyakuPlanLatenessP99High",
        "YoyakuGradingQueueStalled",
        "YoyakuLeaseTakeoversRising",
        "YoyakuStorageNearlyFull",
        "YoyakuPlatformFaultRefundsRising",
    } <= names


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("YOYAKU_REQUIRE_PROMTOOL"):
            pytest.fail("promtool is required here (Debian package `prometheus`)")
        pytest.skip("promtool is not installed (Debian package `prometheus`)")
    return found


def test_promtool_accepts_the_rules() -> None:
    result = subprocess.run(
        [_promtool(), "check", "rules", str(ALERTS)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 10 rules found" in result.stdout + result.stderr


def test_promtool_unit_tests_of_the_seed_alerts_pass() -> None:
    tests = ROOT / "deploy" / "prometheus" / "alerts_test.yml"
    result = subprocess.run(
        [_promtool(), "test", "rules", str(tests)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tests.parent,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr
