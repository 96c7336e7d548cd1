"""Header booking: a request to `/api/` (except `/api/schedules/` itself and the schema)
carrying `X-Schedule-Datetime` (or `X-Xaas-Schedule-Datetime`) is handed to
`HeaderBookingApi` instead of its own view; the API view authenticates, checks and books it,
and the one exception handler answers its errors (`apps.schedule.api.header`)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.template.response import SimpleTemplateResponse

from apps.schedule.api.header import HeaderBookingApi, header_booking_applies, schedule_header


class HeaderBookingMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.booking_view = HeaderBookingApi.as_view(passthrough=get_response)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if schedule_header(request) is None or not header_booking_applies(request.path):
            return self.get_response(request)
        response = self.booking_view(request)
        # Django renders a view's response itself only when it called the view.
        if isinstance(response, SimpleTemplateResponse):
            response.render()
        return response
