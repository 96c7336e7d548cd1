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
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.base import ApiView
from apps.core.api.schema import error_responses
from apps.jobs.admission import reservation_reserve
from apps.jobs.selectors import quota_status
from apps.quotas.api.serializers import (
    QuotaMeOutputSerializer,
    ReservationOutputSerializer,
    ReservationTtlInputSerializer,
)
from apps.quotas.selectors import reservation_list


class QuotaMeApi(ApiView):
    @extend_schema(
        operation_id="quotas_me", responses={200: QuotaMeOutputSerializer, **error_responses()}
    )
    def get(self, request: Request) -> Response:
        return self.respond(QuotaMeOutputSerializer, quota_status(user=self.user))


class ReservationListCreateApi(ApiView):
    """Your reservations (with their state now), or reserve a concurrent-job slot."""

    @extend_schema(
        operation_id="quotas_reservations_list",
        responses={200: ReservationOutputSerializer(many=True), **error_responses()},
    )
    def get(self, request: Request) -> Response:
        reservations = reservation_list(user=self.user)
        return self.respond(
            ReservationOutputSerializer, reservations, many=True, now=timezone.now()
        )

    @extend_schema(
        operation_id="quotas_reservations_reserve",
        request=ReservationTtlInputSerializer,
        responses={
            201: ReservationOutputSerializer,
            **error_responses(400, 415, 429, _429="`quota_exceeded`: no free concurrent-job slot."),
        },
    )
    def post(self, request: Request) -> Response:
        data = self.body(ReservationTtlInputSerializer)
        reservation = reservation_reserve(user=self.user, ttl_seconds=data.get("ttl_seconds"))
        return self.respond(ReservationOutputSerializer, reservation, status=HTTPStatus.CREATED)
