"""Views that raise each kind of error, mounted only by the error-handler tests."""

from __future__ import annotations

from typing import Any

from django.urls import include, path
from rest_framework import serializers
from rest_framework.permissions import AllowAny, IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView

from apps.core.exceptions import DomainError


class Teapot(DomainError):
    code = "teapot"
    http_status = 418
    default_message = "I am a teapot."


class EchoSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(max_length=5)
    count = serializers.IntegerField(min_value=1)


class EchoView(APIView):
    permission_classes = [AllowAny]

    def post(self, request: Request) -> Response:
        serializer = EchoSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(serializer.validated_data)


class AdminOnlyView(APIView):
    permission_classes = [IsAdminUser]

    def get(self, request: Request) -> Response:
        return Response({"ok": True})


class DomainView(APIView):
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        raise Teapot(extra={"hint": "brew"}, headers={"Retry-After": "7"})


class CrashView(APIView):
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        raise RuntimeError("boom")


class HeaderCrashView(APIView):
    """Fails with request data in its exception, as any code that chokes on a header would."""

    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        raise RuntimeError(f"unexpected X-Probe: {request.headers.get('X-Probe', '')}")


class OnePerMinute(AnonRateThrottle):
    rate = "1/min"
    scope = "tests"


class ThrottledView(APIView):
    permission_classes = [AllowAny]
    throttle_classes = [OnePerMinute]

    def get(self, request: Request) -> Response:
        return Response({"ok": True})


test_patterns = [
    path("echo/", EchoView.as_view()),
    path("admin-only/", AdminOnlyView.as_view()),
    path("domain/", DomainView.as_view()),
    path("crash/", CrashView.as_view()),
    path("header-crash/", HeaderCrashView.as_view()),
    path("throttled/", ThrottledView.as_view()),
]

urlpatterns = [
    path("api/test/", include(test_patterns)),
    path("", include("config.urls")),
]
