"""Reservation release and extend. Reserving a slot and the usage page count jobs, so they are
served by the jobs app (`apps.jobs.api.quota_views`): quotas do not depend on jobs."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.schema import error_responses
from apps.quotas.api.serializers import ReservationOutputSerializer, ReservationTtlInputSerializer
from apps.quotas.services import reservation_extend, reservation_release

_NOT_ACTIVE = "`reservation_not_active`: the reservation is consumed or expired."


class ReservationReleaseApi(APIView):
    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="quotas_reservations_release",
        request=None,
        responses={
            200: ReservationOutputSerializer,
            **error_responses(403, 404, 409, 415, _409=_NOT_ACTIVE),
        },
    )
    def post(self, request: Request, reservation_id: str) -> Response:
        reservation = reservation_release(
            reservation_id=reservation_id,
            user=request.user,  # type: ignore[arg-type]
        )
        return Response(ReservationOutputSerializer(reservation).data)


class ReservationExtendApi(APIView):
    parser_classes = [JSONParser]

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
        data = ReservationTtlInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        reservation = reservation_extend(
            reservation_id=reservation_id,
            user=request.user,  # type: ignore[arg-type]
            ttl_seconds=data.validated_data.get("ttl_seconds"),
        )
        return Response(ReservationOutputSerializer(reservation).data)
