"""`/api/quotas/me/` and `/api/quotas/reservations/`: the usage page and taking a slot.

Their paths are the quotas' (SPEC §3), but both count the user's jobs: the usage comes from
`apps.jobs.selectors.quota_status` and a reservation is taken by admission
(`apps.jobs.admission.reservation_reserve`). Served here so that the quotas app never depends
on the jobs app.
"""

from __future__ import annotations

from http import HTTPStatus

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.schema import error_responses
from apps.jobs.admission import reservation_reserve
from apps.jobs.selectors import quota_status
from apps.quotas.api.serializers import (
    QuotaMeOutputSerializer,
    ReservationOutputSerializer,
    ReservationTtlInputSerializer,
)
from apps.quotas.selectors import reservation_list


class QuotaMeApi(APIView):
    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="quotas_me", responses={200: QuotaMeOutputSerializer, **error_responses()}
    )
    def get(self, request: Request) -> Response:
        return Response(QuotaMeOutputSerializer(quota_status(user=request.user)).data)


class ReservationListCreateApi(APIView):
    """Your reservations (with their state now), or reserve a concurrent-job slot."""

    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="quotas_reservations_list",
        responses={200: ReservationOutputSerializer(many=True), **error_responses()},
    )
    def get(self, request: Request) -> Response:
        reservations = reservation_list(user=request.user)
        context = {"now": timezone.now()}
        return Response(ReservationOutputSerializer(reservations, many=True, context=context).data)

    @extend_schema(
        operation_id="quotas_reservations_reserve",
        request=ReservationTtlInputSerializer,
        responses={
            201: ReservationOutputSerializer,
            **error_responses(400, 415, 429, _429="`quota_exceeded`: no free concurrent-job slot."),
        },
    )
    def post(self, request: Request) -> Response:
        data = ReservationTtlInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        reservation = reservation_reserve(
            user=request.user,  # type: ignore[arg-type]
            ttl_seconds=data.validated_data.get("ttl_seconds"),
        )
        return Response(ReservationOutputSerializer(reservation).data, status=HTTPStatus.CREATED)
