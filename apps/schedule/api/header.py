"""Header booking as an API view: an authenticated request to `/api/` carrying
`X-Schedule-Datetime` (or `X-Xaas-Schedule-Datetime`) is not executed now; a point Life
replays it at that time → 202 `{"life_uuid"}` (SPEC §6).

`HeaderBookingMiddleware` hands such a request to `HeaderBookingApi` instead of its own view,
so it is authenticated, checked and answered by the one API idiom: DRF's authenticators (the
session one enforces CSRF itself, as a view would, so a forged cross-site form can no more book
a request than run it), the API base's token scopes, and every error rendered by the one
exception handler. An anonymous request is not booked: it goes on to its own view untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.base import ApiView
from apps.core.scopes import Scope
from apps.schedule.api.serializers import HeaderBookingOutputSerializer
from apps.schedule.api.views import booking_token_id
from apps.schedule.exceptions import InvalidSchedule, ScheduledRequestTooLarge
from apps.schedule.services.booking import life_book_request, parse_schedule_header

#: An action may not carry these (`targets.BOOKING_HEADERS`).
HEADERS = ("X-Schedule-Datetime", "X-Xaas-Schedule-Datetime")
EXEMPT_PREFIXES = ("/api/schedules/", "/api/schema/", "/api/docs/")


def schedule_header(request: HttpRequest) -> str | None:
    """The request's booking time, if it carries one of `HEADERS`."""
    return next((request.headers[h] for h in HEADERS if request.headers.get(h)), None)


def header_booking_applies(path: str) -> bool:
    """Whether a request to `path` with a schedule header is booked rather than run."""
    return path.startswith("/api/") and not path.startswith(EXEMPT_PREFIXES)


class HeaderBookingApi(ApiView):
    """Books the request it is given, whatever its method and path (not routed: the
    middleware calls it). A token needs `submit` (booking is a write) and the scope of the
    booked call itself, because the replay runs as the owner without the token."""

    permission_classes = [AllowAny]
    invalid_input_error = InvalidSchedule
    #: The rest of the middleware chain: an anonymous request goes on there, unbooked.
    passthrough: Callable[[HttpRequest], HttpResponse] | None = None
    _passed_through = False

    @classmethod
    def scope_for(cls, method: str, body: Any = None) -> str | None:
        return Scope.SUBMIT.value

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # Read the body first: Django keeps a copy, so parsing it during authentication (the
        # session CSRF check reads POST) leaves it readable for the booking.
        try:
            request._request.body  # noqa: B018
        except RequestDataTooBig as exc:
            raise ScheduledRequestTooLarge() from exc
        super().initial(request, *args, **kwargs)

    def book(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        django_request = request._request
        if not request.user or not request.user.is_authenticated:
            assert self.passthrough is not None  # noqa: S101 - set by the middleware
            self._passed_through = True
            # The request's own view's answer, returned untouched (`finalize_response`).
            return self.passthrough(django_request)  # type: ignore[return-value]
        method, body = django_request.method or "GET", django_request.body
        self.scope_require_for_call(method=method, path=django_request.path, body=body)
        at = parse_schedule_header(schedule_header(django_request) or "")
        life = life_book_request(
            user=self.user,
            at=at,
            method=method,
            full_path=django_request.get_full_path(),
            body=body,
            content_type=django_request.META.get("CONTENT_TYPE", "") if body else "",
            booking_token_id=booking_token_id(self),
        )
        return self.respond(HeaderBookingOutputSerializer, life, status=HTTPStatus.ACCEPTED)

    # Every method is booked (OPTIONS too: DRF's own metadata answer is not run).
    get = post = put = patch = delete = head = trace = book
    options = book  # type: ignore[assignment]

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        if self._passed_through:
            return response  # the request's own view answered it: left as it was
        return super().finalize_response(request, response, *args, **kwargs)
