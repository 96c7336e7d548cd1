"""Operators' views: `GET /metrics` (Prometheus) and the staff page `/ops/`."""

from __future__ import annotations

import hmac
from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from apps.core.handlers import error_body
from apps.core.metrics import metrics_enabled, metrics_exposition
from apps.core.ops_summary import ops_summary


def _refusal(status: HTTPStatus, code: str, message: str) -> JsonResponse:
    response = JsonResponse(error_body(code, message), status=status)
    if status == HTTPStatus.UNAUTHORIZED:
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


def metrics_token_sent(request: HttpRequest) -> bool:
    """True when METRICS_TOKEN is set and the request carries `Authorization: Bearer
    <METRICS_TOKEN>` (compared in constant time)."""
    token = str(settings.METRICS_TOKEN)
    if not token:
        return False
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )


def metrics_refusal(request: HttpRequest) -> JsonResponse | None:
    """None when the request may read the metrics, else the refusal.

    With METRICS_TOKEN set: `Authorization: Bearer <METRICS_TOKEN>` (compared in constant
    time); no credentials → 401, other credentials → 403. Without a token: open with DEBUG on,
    403 otherwise (a production deployment must choose a token).
    """
    token = str(settings.METRICS_TOKEN)
    if not token:
        if settings.DEBUG:
            return None
        return _refusal(
            HTTPStatus.FORBIDDEN,
            "permission_denied",
            "Metrics are disabled: set METRICS_TOKEN (they are open only with DEBUG on).",
        )
    if not request.headers.get("Authorization", ""):
        return _refusal(
            HTTPStatus.UNAUTHORIZED,
            "not_authenticated",
            "Send Authorization: Bearer <METRICS_TOKEN>.",
        )
    if not metrics_token_sent(request):
        return _refusal(HTTPStatus.FORBIDDEN, "permission_denied", "Wrong metrics token.")
    return None


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Every process's `yoyaku_*` metrics in the Prometheus text format 0.0.4 (SPEC §10), which
    every Prometheus version reads (all our names are classic ones)."""
    if not metrics_enabled():
        return _refusal(HTTPStatus.NOT_FOUND, "not_found", "Metrics are off (METRICS_ENABLED).")
    refusal = metrics_refusal(request)
    if refusal is not None:
        return refusal
    return HttpResponse(metrics_exposition(), content_type=CONTENT_TYPE_PLAIN_0_0_4)


@require_GET
def ops_page(request: HttpRequest) -> HttpResponse:
    """The headline numbers for someone without Prometheus (staff only). A visitor is sent to
    the site's login; a signed-in user who is not staff gets the 403 page, which says why (not
    the admin's login form, which would ask them for an account they cannot have)."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not request.user.is_staff:
        raise PermissionDenied("The operations page is for staff only.")
    context: dict[str, Any] = {"summary": ops_summary(), "title": "Operations"}
    return render(request, "ops.html", context)
