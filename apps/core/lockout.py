"""What a locked-out login gets (django-axes' `AXES_LOCKOUT_CALLABLE`).

Axes counts failed logins per (username, client IP) on every login form that goes through
`django.contrib.auth.authenticate` (the admin's and `/accounts/login/`). Once a pair is locked
out, every attempt of that pair is refused before the password is checked, until the cool-off
passes. A JSON client (an `/api/` path, `Accept: application/json` or an XMLHttpRequest) gets
the SPEC's error body; a browser gets a page. Both carry `Retry-After`.
"""

from __future__ import annotations

import math
from http import HTTPStatus
from typing import Any

from axes.helpers import get_cool_off
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from apps.core.handlers import error_body

LOCKED_OUT_CODE = "login_locked_out"


def lockout_retry_after() -> int:
    """Seconds until a locked-out pair may try again (the whole cool-off: axes restarts it on
    every attempt made while locked out). At least 1."""

    cool_off = get_cool_off()
    return max(1, math.ceil(cool_off.total_seconds())) if cool_off else 1


def _wants_json(request: HttpRequest) -> bool:
    return (
        request.path.startswith("/api/")
        or "application/json" in request.headers.get("Accept", "")
        or request.headers.get("X-Requested-With") == "XMLHttpRequest"
    )


def login_lockout_response(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: dict[str, Any] | None = None,
) -> HttpResponse:
    retry_after = lockout_retry_after()
    message = (
        "Too many failed logins for this username from your address; "
        f"try again in {retry_after} seconds."
    )
    response: HttpResponse
    if _wants_json(request):
        response = JsonResponse(
            error_body(LOCKED_OUT_CODE, message, retry_after=retry_after),
            status=HTTPStatus.TOO_MANY_REQUESTS,
        )
    else:
        response = render(
            request,
            "registration/locked_out.html",
            {"message": message, "retry_after": retry_after},
            status=HTTPStatus.TOO_MANY_REQUESTS,
        )
    response["Retry-After"] = str(retry_after)
    return response
