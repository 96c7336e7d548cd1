"""The platform's URLs plus POST /bench/baseline/: a plain DRF endpoint inserting one row."""

from __future__ import annotations

from http import HTTPStatus

from django.urls import URLPattern, URLResolver, path
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.quotas.models import Reservation
from config.urls import urlpatterns as platform_urlpatterns


class BaselineInsertApi(APIView):
    """Same authentication and rendering as the API; one INSERT, no lock, no check."""

    schema = None

    def post(self, request: Request) -> Response:
        row = Reservation.objects.create(
            user_id=int(request.user.pk or 0), expires_at=timezone.now()
        )
        return Response({"success": True, "id": row.pk}, status=HTTPStatus.CREATED)


urlpatterns: list[URLPattern | URLResolver] = [
    path("bench/baseline/", BaselineInsertApi.as_view()),
    *platform_urlpatterns,  # type: ignore[list-item]
]
