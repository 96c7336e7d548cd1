from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from rest_framework.test import APIClient

from apps.core.logcontext import log_context_fresh
from apps.submissions.models import Submission
from tests.factories.submissions import make_submission
from tests.factories.tokens import make_token
from tests.factories.users import make_user
from tests.flush import flush_by_delete
from tests.processes import start_process  # noqa: F401 - a fixture for every test package

UsingPostgres = settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
if UsingPostgres:
    flush_by_delete()

# Hypothesis' wall-clock checks (an example's deadline, input generation "too slow") measure how
# busy the machine is, not the code: CI runs two suites side by side on pytest-xdist workers.
# The examples, their number and the properties checked stay the same.
hypothesis_settings.register_profile(
    "yoyaku", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("yoyaku")

# A suite started in the background of a shell without job control inherits SIGINT (and
# SIGQUIT) ignored, and so would every process it starts: the tests that press Ctrl-C on the
# client or on runserver would then wait forever. A handler here is reset to the default in
# each child, whatever the suite was started from.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def pytest_report_header() -> list[str]:
    db = settings.DATABASES["default"]
    broker = "redis" if "redis" in settings.Q_CLUSTER else "orm"
    return [f"yoyaku: database={db['ENGINE'].rsplit('.', 1)[-1]} broker={broker}"]


@pytest.fixture(autouse=True)
def _media_root(settings: Any, tmp_path: Any) -> None:
    """Every test stores files in its own folder."""
    settings.MEDIA_ROOT = str(tmp_path / "media")


@pytest.fixture(autouse=True)
def _fresh_log_context() -> Iterator[None]:
    """Every test starts with no log ids bound: a service a test calls outside any request or
    task (`job_submit`, a lease) binds its ids to the test's thread until the test ends."""
    with log_context_fresh():
        yield


@pytest.fixture(scope="session", autouse=True)
def _no_leftover_database_sessions(
    request: pytest.FixtureRequest, django_db_setup: None, django_db_blocker: Any
) -> Iterator[None]:
    """PostgreSQL refuses to drop the test database while another session is connected to it.

    A helper thread or child process of some test may still hold a connection when the session
    ends; report it (so the leak stays visible) and end it, so teardown can drop the database.
    """
    yield
    if not UsingPostgres:
        return
    from django.db import connection

    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, application_name, state, left(query, 120) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        for pid, application, state, query in cursor.fetchall():
            if reporter is not None:
                reporter.write_line(
                    f"leftover database session {pid} ({application}, {state}): {query}"
                )
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])


@pytest.fixture(autouse=True)
def _close_webhook_connections() -> Iterator[None]:
    """Webhook calls keep pooled keep-alive connections and the plan threads keep database
    connections; close them with the test that opened them, or the sockets are reported
    unclosed in whichever test happens to collect them (and the test database cannot be
    dropped while a thread holds a connection to it)."""
    yield
    from apps.schedule.batch import plan_executor_shutdown
    from apps.schedule.transport import http_clients_close

    plan_executor_shutdown()
    http_clients_close()


@pytest.fixture
def user(db: None) -> User:
    return make_user(username="alice")


@pytest.fixture
def other_user(db: None) -> User:
    return make_user(username="bob")


@pytest.fixture
def staff_user(db: None) -> User:
    return make_user(username="staff", is_staff=True, is_superuser=True)


@pytest.fixture
def api_client() -> APIClient:
    """No credentials."""
    return APIClient()


@pytest.fixture
def client_for(db: None) -> Callable[[User], APIClient]:
    """An APIClient that sends `Authorization: Bearer <token>` for the given user (a new
    token with every scope the user may hold)."""

    def make(some_user: User) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token(some_user)}")
        return client

    return make


@pytest.fixture
def user_client(user: User, client_for: Callable[[User], APIClient]) -> APIClient:
    return client_for(user)


@pytest.fixture
def other_client(other_user: User, client_for: Callable[[User], APIClient]) -> APIClient:
    return client_for(other_user)


@pytest.fixture
def staff_client(staff_user: User, client_for: Callable[[User], APIClient]) -> APIClient:
    return client_for(staff_user)


@pytest.fixture
def reviewer(db: None) -> User:
    return make_user(username="rita", reviewer=True)


@pytest.fixture
def other_reviewer(db: None) -> User:
    return make_user(username="ravi", reviewer=True)


@pytest.fixture
def reviewer_client(reviewer: User, client_for: Callable[[User], APIClient]) -> APIClient:
    return client_for(reviewer)


@pytest.fixture
def grader_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Any) -> Path:
    """Use the recording grader; returns the file listing every invocation."""
    path = tmp_path / "grader-invocations.log"
    monkeypatch.setenv("YOYAKU_TEST_GRADER_LOG", str(path))
    settings.GRADER = "tests.grading.graders.RecordingGrader"
    return path


@pytest.fixture
def redis_url() -> str:
    """The Redis server named by REDIS_URL; tests that need Redis skip without it."""
    url = os.environ.get("REDIS_URL", "")
    if not url:
        pytest.skip("REDIS_URL is not set")
    return url


@pytest.fixture
def ready_submission(user: User) -> Submission:
    """A complete draft submission of alice."""
    return make_submission(owner=user)


@pytest.fixture
def submit(user_client: APIClient) -> Callable[..., Any]:
    """POST /api/jobs/ as alice; `headers` go as HTTP headers."""

    def post(body: dict[str, Any], client: APIClient | None = None, **headers: str) -> Any:
        return (client or user_client).post("/api/jobs/", body, format="json", headers=headers)

    return post
