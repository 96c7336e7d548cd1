"""Reservation release and extend. Reserving a slot and the usage page count jobs, so they are
served by the jobs app (`apps.jobs.api.quota_views`): quotas do not depend on jobs."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.base import ApiView
from apps.core.api.schema import error_responses
from apps.quotas.api.serializers import ReservationOutputSerializer, ReservationTtlInputSerializer
from apps.quotas.services import reservation_extend, reservation_release

_NOT_ACTIVE = "`reservation_not_active`: the reservation is consumed or expired."


class ReservationReleaseApi(ApiView):
    @extend_schema(
        operation_id="quotas_reservations_release",
        request=None,
        responses={
            200: ReservationOutputSerializer,
            **error_responses(403, 404, 409, 415, _409=_NOT_ACTIVE),
        },
    )
    def post(self, request: Request, reservation_id: str) -> Response:
        reservation = reservation_release(reservation_id=reservation_id, user=self.user)
        return self.respond(ReservationOutputSerializer, reservation)


class ReservationExtendApi(ApiView):
    @extend_schema(
        operation_id="quotas_reservations_extend",
        request=ReservationTtlInputSerializer,
        responses={
            200: ReservationOutputSerializer,
            **error_responses(
                400,
                403,
                404,
                409,
                415,
                _409="`reservation_not_active`: released, consumed or expired.",
            ),
        },
    )
    def post(self, request: Request, reservation_id: str) -> Response:
        data = self.body(ReservationTtlInputSerializer)
        reservation = reservation_extend(
            reservation_id=reservation_id, user=self.user, ttl_seconds=data.get("ttl_seconds")
        )
        return self.respond(ReservationOutputSerializer, reservation)
