from __future__ import annotations

from http import HTTPStatus

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.base import ApiView
from apps.core.api.schema import error_responses
from apps.quotas.api.serializers import (
    QuotaMeOutputSerializer,
    ReservationOutputSerializer,
    ReservationTtlInputSerializer,
)
from apps.quotas.selectors import quota_status, reservation_list
from apps.quotas.services import reservation_extend, reservation_release, reservation_reserve

_NOT_ACTIVE = "`reservation_not_active`: the reservation is consumed or expired."


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
