"""Request middleware: request ids, log context and HTTP metrics for every request; JSON
errors under `/api/` even where Django, not DRF, produced the error (CSRF, 400s, 500s)."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
import uuid
from collections.abc import Callable
from http import HTTPStatus

from django.conf import settings
from django.core.signals import got_request_exception
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse, JsonResponse

from apps.core.handlers import (
    DATABASE_RETRY_AFTER,
    DATABASE_UNAVAILABLE,
    database_unavailable_body,
    error_body,
    status_code_name,
)
from apps.core.logcontext import request_context_end, request_context_start
from apps.core.metrics import http_request_observe

logger = logging.getLogger(__name__)
request_logger = logging.getLogger("yoyaku.request")

REQUEST_ID_HEADER = "X-Request-ID"
# A client's request id is kept when it is a plausible trace id (uuid, hex, base64, W3C
# traceparent); anything else (spaces, control characters, 200 characters) is replaced.
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:/+=@-]{1,128}$")


def request_id_from(header: str | None) -> str:
    """The client's `X-Request-ID` when acceptable, else a new one (32 hex characters)."""
    if header and _REQUEST_ID.match(header):
        return header
    return uuid.uuid4().hex


def route_name(request: HttpRequest) -> str:
    """A bounded label for the request's route: the URL pattern's view name (`job-detail`),
    `static` for static files, `unmatched` when no pattern matched."""
    match = getattr(request, "resolver_match", None)
    if match is not None and match.view_name:
        return str(match.view_name)
    if request.path.startswith(str(settings.STATIC_URL)):
        return "static"
    return "unmatched"


class RequestObservabilityMiddleware:
    """First in MIDDLEWARE: accepts or makes the request id and returns it on every response
    (errors included), binds it for every log line of the request (the user id joins once
    the request is authenticated), writes one access line and records the HTTP metrics."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.log_requests = bool(settings.LOG_REQUESTS)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        request_id = request_id_from(request.headers.get(REQUEST_ID_HEADER))
        request.request_id = request_id  # type: ignore[attr-defined]
        tokens = request_context_start(request=request, request_id=request_id)
        try:
            response = self.get_response(request)
            response[REQUEST_ID_HEADER] = request_id
            seconds = time.perf_counter() - started
            route = route_name(request)
            http_request_observe(
                route=route,
                method=request.method or "",
                status=response.status_code,
                seconds=seconds,
            )
            if self.log_requests:
                request_logger.info(
                    "%s %s %s %.1f ms",
                    request.method,
                    request.path,
                    response.status_code,
                    seconds * 1000,
                    extra={
                        "method": request.method,
                        "path": request.path,
                        "route": route,
                        "status": response.status_code,
                        "duration_ms": round(seconds * 1000, 3),
                    },
                )
            return response
        finally:
            request_context_end(tokens)


def _header_lines(request: HttpRequest) -> list[tuple[str, str]]:
    """The request's header lines as WSGI passed them (names as in META)."""
    meta = request.META
    names = [k for k in meta if k.startswith("HTTP_") or k in ("CONTENT_TYPE", "CONTENT_LENGTH")]
    return [(name, str(meta[name])) for name in names if meta[name] != ""]


class RequestHeadLimitsMiddleware:
    """A URL longer than `MAX_URL_LENGTH` → 414 `uri_too_long`; more than
    `MAX_REQUEST_HEADERS` header lines, or one longer than `MAX_REQUEST_HEADER_SIZE` → 431
    `request_header_fields_too_large`; both in the one error body, before any other work.

    gunicorn's limits (config/gunicorn.py) are set above these, so a client meets the app's
    JSON answer, not the server's page."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.max_url = int(settings.MAX_URL_LENGTH)
        self.max_headers = int(settings.MAX_REQUEST_HEADERS)
        self.max_header = int(settings.MAX_REQUEST_HEADER_SIZE)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        url_length = len(request.get_full_path())
        if url_length > self.max_url:
            return JsonResponse(
                error_body(
                    "uri_too_long",
                    f"The URL has {url_length} characters; at most {self.max_url} are accepted.",
                    max_url_length=self.max_url,
                ),
                status=HTTPStatus.REQUEST_URI_TOO_LONG,
            )
        lines = _header_lines(request)
        longest = max((len(name) - 3 + len(value) for name, value in lines), default=0)
        if len(lines) > self.max_headers or longest > self.max_header:
            return JsonResponse(
                error_body(
                    "request_header_fields_too_large",
                    f"At most {self.max_headers} header lines of at most {self.max_header} "
                    "bytes each are accepted.",
                    max_headers=self.max_headers,
                    max_header_size=self.max_header,
                ),
                status=HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
            )
        return self.get_response(request)


class ApiJsonErrorMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not request.path.startswith("/api/") or response.status_code < 400:
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        if response.get("Content-Type", "").startswith("application/problem+json"):
            return response  # RFC 9457 problem details (the resumable uploads draft's errors)
        if response.status_code == 500 and isinstance(
            getattr(request, "yoyaku_exception", None), DATABASE_UNAVAILABLE
        ):
            # A middleware (sessions, authentication) could not reach the database.
            return _database_unavailable()
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
        if isinstance(exception, DATABASE_UNAVAILABLE):
            logger.warning("Database unavailable on %s: %s", request.path, exception)
            return _database_unavailable()
        logger.exception("Unhandled error on %s", request.path, exc_info=exception)
        return HttpResponse(
            json.dumps(error_body("internal_error", "Internal server error.")),
            status=500,
            content_type="application/json",
        )


def _database_unavailable() -> HttpResponse:
    response = JsonResponse(database_unavailable_body(), status=503)
    response["Retry-After"] = DATABASE_RETRY_AFTER
    return response


@receiver(got_request_exception)
def _remember_exception(
    sender: object, request: HttpRequest | None = None, **kwargs: object
) -> None:
    """Django turns an exception raised in a middleware into a 500 page before the JSON error
    middleware sees it; keep the exception on the request so that middleware can tell a
    database outage (503) from a bug (500)."""
    if request is not None:
        request.yoyaku_exception = sys.exc_info()[1]  # type: ignore[attr-defined]
