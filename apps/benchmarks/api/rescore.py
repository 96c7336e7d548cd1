"""A phase's rescore (SPEC §11.6), for hosts and staff:

- `GET /api/challenges/{slug}/phases/{phase}/rescore/` → `{"version", "done", "failed",
  "total", "state", "scoring_version"}` (the newest rescore; `scoring_version` is the
  version the leaderboard serves);
- `POST .../rescore/retry/` scores the failed items again;
- `POST .../rescore/cancel/` stops a running rescore; the leaderboard stays where it is.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.benchmarks.services.rescores import rescore_cancel, rescore_progress, rescore_retry
from apps.core.api.base import ApiView
from apps.core.api.schema import error_responses


class RescoreOutputSerializer(serializers.Serializer[Any]):
    version = serializers.IntegerField(help_text="The scoring version being (or last) rescored.")
    done = serializers.IntegerField()
    failed = serializers.IntegerField()
    total = serializers.IntegerField()
    state = serializers.ChoiceField(
        choices=["none", "running", "switched", "cancelled", "superseded"]
    )
    scoring_version = serializers.IntegerField(help_text="The version the leaderboard serves.")


class PhaseRescoreApi(ApiView):
    token_scopes = {"GET": "host"}

    @extend_schema(
        operation_id="challenges_phases_rescore",
        responses={200: RescoreOutputSerializer, **error_responses(403, 404)},
        description="The phase's newest rescore: how many of its submissions and baselines "
        "are scored in the new version (`done`), failed to be (`failed`), and in all (`total`). "
        "Hosts and staff only.",
    )
    def get(self, request: Request, slug: str, phase: str) -> Response:
        progress = rescore_progress(user=self.user, slug=slug, phase_slug=phase)
        return self.respond(RescoreOutputSerializer, progress)


class PhaseRescoreRetryApi(ApiView):
    token_scopes = {"POST": "host"}

    @extend_schema(
        operation_id="challenges_phases_rescore_retry",
        request=None,
        responses={200: RescoreOutputSerializer, **error_responses(403, 404)},
        description="Score the newest rescore's failed items again. Idempotent.",
    )
    def post(self, request: Request, slug: str, phase: str) -> Response:
        progress = rescore_retry(user=self.user, slug=slug, phase_slug=phase)
        return self.respond(RescoreOutputSerializer, progress)


class PhaseRescoreCancelApi(ApiView):
    token_scopes = {"POST": "host"}

    @extend_schema(
        operation_id="challenges_phases_rescore_cancel",
        request=None,
        responses={
            200: RescoreOutputSerializer,
            **error_responses(403, 404, 409, _409="`rescore_not_running`."),
        },
        description="Cancel the running rescore; the leaderboard keeps the version it serves.",
    )
    def post(self, request: Request, slug: str, phase: str) -> Response:
        progress = rescore_cancel(user=self.user, slug=slug, phase_slug=phase)
        return self.respond(RescoreOutputSerializer, progress)
