"""Keep `/api/` JSON even where Django, not DRF, produced the error (CSRF, 400s, 500s)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from http import HTTPStatus

from django.http import HttpRequest, HttpResponse, JsonResponse

from apps.core.handlers import error_body, status_code_name

logger = logging.getLogger(__name__)


class ApiJsonErrorMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not request.path.startswith("/api/") or response.status_code < 400:
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        code = status_code_name(response.status_code)
        try:
            message = HTTPStatus(response.status_code).phrase
        except ValueError:
            message = "Error"
        replaced = JsonResponse(error_body(code, message + "."), status=response.status_code)
        for header in ("Retry-After", "WWW-Authenticate", "Allow"):
            if header in response:
                replaced[header] = response[header]
        return replaced

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not request.path.startswith("/api/"):
            return None
        logger.exception("Unhandled error on %s", request.path, exc_info=exception)
        return HttpResponse(
            json.dumps(error_body("internal_error", "Internal server error.")),
            status=500,
            content_type="application/json",
        )
