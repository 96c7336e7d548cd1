"""Production settings, read the way production reads them: a fresh interpreter with only the
environment (`config.settings`, not the test settings)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The production settings README.md documents (DEBUG off, secrets set, HTTPS).
PRODUCTION_ENV = {
    "DEBUG": "false",
    "SECRET_KEY": secrets.token_urlsafe(50),
    "SCHEDULE_WEBHOOK_SECRET": "whsec_dGVzdC1vbmx5LXlveWFrdS13ZWJob29rLXNlY3JldA==",
    "ALLOWED_HOSTS": "yoyaku.example.org",
    "SECURE_SSL_REDIRECT": "true",
    "SECURE_HSTS_SECONDS": "31536000",
}
OVERRIDABLE = [
    "DEBUG",
    "SECRET_KEY",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "ALLOWED_HOSTS",
]


# Set inside this test process by other tests (the browser fixtures); never in production.
TEST_ONLY = ["DJANGO_ALLOW_ASYNC_UNSAFE"]


def _environment(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in OVERRIDABLE + TEST_ONLY}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    env.update(extra)
    return env


def _settings(extra: dict[str, str]) -> dict[str, object]:
    program = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        "print(json.dumps({k: getattr(s, k) for k in "
        "['SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SECURE_HSTS_SECONDS']}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=ROOT,
        env=_environment(extra),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_debug_off_makes_cookies_secure_by_default() -> None:
    assert _settings({**PRODUCTION_ENV, "SECURE_SSL_REDIRECT": "false"}) == {
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_HSTS_SECONDS": 31536000,
    }
    without_hsts = {k: v for k, v in PRODUCTION_ENV.items() if k != "SECURE_HSTS_SECONDS"}
    assert _settings(without_hsts)["SECURE_HSTS_SECONDS"] == 0


def test_each_cookie_setting_is_overridable() -> None:
    assert _settings(
        {
            **PRODUCTION_ENV,
            "SESSION_COOKIE_SECURE": "false",
            "CSRF_COOKIE_SECURE": "true",
            "SECURE_HSTS_SECONDS": "60",
        }
    ) == {"SESSION_COOKIE_SECURE": False, "CSRF_COOKIE_SECURE": True, "SECURE_HSTS_SECONDS": 60}


def test_debug_on_keeps_cookies_usable_over_plain_http() -> None:
    assert _settings({"DEBUG": "true"}) == {
        "SESSION_COOKIE_SECURE": False,
        "CSRF_COOKIE_SECURE": False,
        "SECURE_HSTS_SECONDS": 0,
    }


@pytest.mark.slow
def test_check_deploy_is_clean_with_the_documented_production_settings() -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=_environment(PRODUCTION_ENV),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "System check identified no issues" in output, output
    assert "WARNING" not in output


def test_check_deploy_still_warns_about_a_cookie_switched_off() -> None:
    """The check is not silenced wholesale: an insecure override is still reported."""
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=_environment({**PRODUCTION_ENV, "SESSION_COOKIE_SECURE": "false"}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "security.W012" in done.stdout + done.stderr
