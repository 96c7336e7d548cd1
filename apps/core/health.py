"""Health checks for `/healthz`: the database decides 200/503, the rest only degrade.

A check registered with `private=True` (the grader's interpreter, limits and isolation) counts
towards `status` for everyone but shows its value only in the detailed report (staff, the
metrics token, or DEBUG on: `apps.core.api.views.healthz`): an anonymous visitor learns that
something is degraded, never how the sandbox is built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connection

HealthCheck = Callable[[], tuple[bool, Any]]
_CHECKS: dict[str, tuple[HealthCheck, bool]] = {}


def register_health_check(name: str, check: HealthCheck, *, private: bool = False) -> None:
    """`check()` returns (healthy, value shown under `name`). A private check's value is shown
    only in the detailed report; its health always counts."""
    _CHECKS[name] = (check, private)


def database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:
        return False
    return True


def broker_ok() -> bool:
    from django_q.brokers import get_broker

    try:
        return bool(get_broker().ping())
    except Exception:
        return False


def health_report(*, details: bool = True) -> tuple[bool, dict[str, Any]]:
    """(database answers, body). Status is `ok` only when every check is healthy; without
    `details` the private checks' values are left out of the body."""
    db = database_ok()
    broker = broker_ok() if db or not _uses_orm_broker() else False
    body: dict[str, Any] = {
        "status": "ok",
        "database": "ok" if db else "unavailable",
        "broker": "ok" if broker else "unavailable",
    }
    healthy = db and broker
    for name, (check, private) in _CHECKS.items():
        try:
            ok, value = check() if db else (False, None)
        except Exception:
            ok, value = False, None
        if details or not private:
            body[name] = value
        healthy = healthy and ok
    if not healthy:
        body["status"] = "degraded"
    return db, body


def _uses_orm_broker() -> bool:
    from django.conf import settings

    return "orm" in settings.Q_CLUSTER
