"""Header booking: an authenticated API request carrying `X-Schedule-Datetime` (or
`X-Xaas-Schedule-Datetime`) is not executed now; a point Life replays it at that time → 202.

Authentication uses DRF's own authenticators (token, session — the session one enforces CSRF
itself, as a view would), so a forged cross-site form can no more book a request than run it.
A token books only what it could run: it needs `submit` and the target view's scope.
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.settings import api_settings

from apps.core.exceptions import DomainError
from apps.core.handlers import error_body
from apps.core.models import ApiToken
from apps.core.scopes import Scope, call_scope, scopes_require
from apps.schedule.api.serializers import HeaderBookingOutputSerializer
from apps.schedule.models import Plan
from apps.schedule.services.booking import life_book_request, parse_schedule_header

HEADERS = ("X-Schedule-Datetime", "X-Xaas-Schedule-Datetime")
EXEMPT_PREFIXES = ("/api/schedules/", "/api/schema/", "/api/docs/")


def _booking_token_id(auth: object) -> str | None:
    if isinstance(auth, ApiToken):
        return str(auth.pk)
    return auth.life.booking_token_id if isinstance(auth, Plan) else None


class HeaderBookingMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        at = next((request.headers[h] for h in HEADERS if request.headers.get(h)), None)
        if (
            at is None
            or not request.path.startswith("/api/")
            or request.path.startswith(EXEMPT_PREFIXES)
        ):
            return self.get_response(request)
        authenticators = [cls() for cls in api_settings.DEFAULT_AUTHENTICATION_CLASSES]  # type: ignore[operator]
        parsers = [cls() for cls in api_settings.DEFAULT_PARSER_CLASSES]  # type: ignore[operator]
        # Read the body first: Django keeps a copy, so parsing it here (the session CSRF check
        # reads POST) leaves it readable for the booking below.
        try:
            request.body  # noqa: B018
        except RequestDataTooBig:
            return JsonResponse(
                error_body("request_too_large", "A scheduled request body is at most 10 MB."),
                status=HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            )
        drf_request = Request(request, parsers=parsers, authenticators=authenticators)
        try:
            user = drf_request.user
        except exceptions.APIException as exc:
            status = exc.status_code
            code = (
                "authentication_failed"
                if status == HTTPStatus.UNAUTHORIZED
                else "permission_denied"
            )
            return JsonResponse(error_body(code, str(exc.detail)), status=status)
        if not user or not user.is_authenticated:
            return self.get_response(request)
        try:
            if isinstance(drf_request.auth, ApiToken):
                # Booking is a write, and the replay will run as the user without the token:
                # the token must hold both scopes now.
                scopes_require(
                    drf_request.auth,
                    Scope.SUBMIT.value,
                    call_scope(
                        method=request.method or "GET", path=request.path, body=request.body
                    ),
                )
            parse_schedule_header(at)
            life = life_book_request(
                user=user,
                at=at,
                method=request.method or "GET",
                full_path=request.get_full_path(),
                body=request.body,
                content_type=request.META.get("CONTENT_TYPE", "") if request.body else "",
                booking_token_id=_booking_token_id(drf_request.auth),
            )
        except DomainError as error:
            return JsonResponse(
                error_body(error.code, error.message, **error.extra), status=int(error.http_status)
            )
        return JsonResponse(HeaderBookingOutputSerializer(life).data, status=HTTPStatus.ACCEPTED)
