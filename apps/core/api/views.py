from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.schema import error_responses
from apps.core.api.serializers import MeSerializer
from apps.core.health import health_report


class MeApi(APIView):
    """The authenticated user."""

    @extend_schema(responses={200: MeSerializer, **error_responses()}, operation_id="me_retrieve")
    def get(self, request: Request) -> Response:
        return Response(MeSerializer(request.user).data)


class ApiNotFound(APIView):
    """Any unknown path under /api/: a JSON 404, never Django's HTML page."""

    permission_classes = [AllowAny]
    authentication_classes: list[Any] = []
    schema = None

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        raise exceptions.NotFound(f"No API endpoint at {request.path}.")


def healthz(request: HttpRequest) -> JsonResponse:
    """No auth. 200 while the database answers (degraded if anything else is missing)."""
    database_up, body = health_report()
    return JsonResponse(body, status=200 if database_up else 503)
