from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

# Playwright's sync API runs an event loop in this thread; the test's own ORM calls are still
# synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture
def page(browser: Any, live_server: Any) -> Iterator[Any]:
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15000)
    yield page
    context.close()


@pytest.fixture
def login(page: Any) -> Callable[[User], Any]:
    """Log `user` in through the real login form (password `pw-for-tests`)."""

    def do_login(user: User) -> Any:
        page.goto("/accounts/login/")
        page.fill("#id_username", user.username)
        page.fill("#id_password", "pw-for-tests")
        page.click("button[type=submit]")
        page.wait_for_load_state("networkidle")
        return page

    return do_login


@pytest.fixture
def shots(tmp_path: Path) -> Callable[[Any, str], Path]:
    """Save a full-page screenshot under the test's temporary folder."""

    def take(page: Any, name: str) -> Path:
        path = tmp_path / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        keep = os.environ.get("SCREENSHOT_DIR")
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(keep) / path.name)
        return path

    return take
