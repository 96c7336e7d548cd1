from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, JsonResponse
from django.utils.cache import patch_vary_headers
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.base import ApiView, PublicApiView
from apps.core.api.schema import error_responses
from apps.core.api.serializers import ApiIndexSerializer, MeSerializer
from apps.core.handlers import error_body, status_code_name
from apps.core.health import health_report
from apps.core.ops import metrics_token_sent


class MeApi(ApiView):
    """The authenticated user."""

    @extend_schema(responses={200: MeSerializer, **error_responses()}, operation_id="me_retrieve")
    def get(self, request: Request) -> Response:
        return self.respond(MeSerializer, self.user)


# The collections of the API, each with what it holds (SPEC §10: `GET /api/` is an index).
API_COLLECTIONS = {
    "me": ("me/", "the authenticated user"),
    "tokens": ("tokens/", "your API tokens: create (scoped, optional expiry), list, revoke"),
    "submissions": ("submissions/", "multi-file submissions, one file per request"),
    "jobs": ("jobs/", "grading jobs: create with an idempotency key, list, logs, cancel"),
    "quotas": ("quotas/me/", "your limits and usage"),
    "reservations": ("quotas/reservations/", "reserved concurrent-job slots"),
    "leaderboard": ("leaderboard/", "best completed score per user, for one question"),
    "leaderboard_questions": ("leaderboard/questions/", "the questions that have a leaderboard"),
    "review_queue": ("review/queue/", "submissions waiting for a human verdict (reviewers)"),
    "schedules": ("schedules/", "webhook reservations (Lives)"),
    "schedule_tasks": ("schedule/tasks/", "run or book a task topic"),
}


class ApiIndexApi(PublicApiView):
    """No auth: where everything is, for a newcomer and for clients that discover."""

    authentication_classes: list[Any] = []

    @extend_schema(
        operation_id="api_index",
        responses={200: ApiIndexSerializer},
        auth=[],
    )
    def get(self, request: Request) -> Response:
        root = request.build_absolute_uri("/api/")
        return self.respond(
            ApiIndexSerializer,
            {
                "name": "Yoyaku API",
                "schema": root + "schema/",
                "docs": root + "docs/",
                "health": request.build_absolute_uri("/healthz"),
                "collections": {
                    name: {"url": root + path, "description": description}
                    for name, (path, description) in API_COLLECTIONS.items()
                },
            },
        )


class ApiNotFound(PublicApiView):
    """Any unknown path under /api/: a JSON 404, never Django's HTML page."""

    authentication_classes: list[Any] = []
    schema = None

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        raise exceptions.NotFound(f"No API endpoint at {request.path}.")


def healthz_details_allowed(request: HttpRequest) -> bool:
    """Whether `/healthz` may show the grader's details (interpreter, limits, isolation): with
    DEBUG on, to a staff session, or with `Authorization: Bearer <METRICS_TOKEN>`. A wrong or
    missing token is no error: the probe still gets the public report."""
    if settings.DEBUG or metrics_token_sent(request):
        return True
    try:
        user = getattr(request, "user", None)
        return bool(user is not None and user.is_active and user.is_staff)
    except DatabaseError:
        # The session cannot be read while the database is down; the report says so anyway.
        return False


def healthz(request: HttpRequest) -> JsonResponse:
    """No auth. 200 while the database answers (degraded if anything else is missing). The
    grader's details only for `healthz_details_allowed`; never stored by a shared cache."""
    database_up, body = health_report(details=healthz_details_allowed(request))
    response = JsonResponse(body, status=200 if database_up else 503)
    response["Cache-Control"] = "no-store"
    patch_vary_headers(response, ("Authorization", "Cookie"))
    return response


def bad_request(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    """Django's 400 (`handler400`: a `Host` not in ALLOWED_HOSTS, a malformed body) on every
    path: the API's error body, as ApiJsonErrorMiddleware gives under /api/, never an HTML
    page."""
    return JsonResponse(error_body(status_code_name(400), "Bad Request."), status=400)
