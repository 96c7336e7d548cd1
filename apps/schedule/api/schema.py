"""The header booking in the schema: any operation it can target may answer its 202."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse

from apps.core.api.schema import error_response, operation_responses_register
from apps.schedule.api.header import HEADERS, header_booking_applies
from apps.schedule.api.serializers import HeaderBookingOutputSerializer

_HEADERS = " or ".join(f"`{name}`" for name in HEADERS)


def header_booking_document() -> None:
    operation_responses_register(
        header_booking_applies,
        {
            202: OpenApiResponse(
                HeaderBookingOutputSerializer,
                description=f"Booked, not run: the request carried {_HEADERS} (a time in "
                "SCHEDULE_TIMEZONE, 'YYYY-MM-DD HH:MM:SS' or ISO 8601 with offset); a point "
                "Life replays it then. See docs/schedule.md.",
            ),
            400: error_response(
                400,
                "`invalid_request` with `fields`, or `invalid_schedule` (a header booking "
                "with a malformed time).",
            ),
            406: error_response(406, "`too_late`: a header booking's time is too close to now."),
            413: error_response(413, "`request_too_large`: a header booking's body over 10 MB."),
            429: error_response(
                429, "`too_many_lives` (header booking), or the operation's own limits."
            ),
        },
    )
