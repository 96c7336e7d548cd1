"""POST /api/challenges/{slug}/phases/{phase}/reveal/ (SPEC §11.3)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.benchmarks.services.reveal import phase_reveal_request
from apps.core.api.base import ApiView
from apps.core.api.schema import error_responses


class RevealOutputSerializer(serializers.Serializer[Any]):
    challenge = serializers.CharField(source="phase.challenge.slug")
    phase = serializers.CharField(source="phase.slug")
    revealed = serializers.BooleanField()
    revealed_at = serializers.DateTimeField()


class PhaseRevealApi(ApiView):
    token_scopes = {"POST": "host"}

    @extend_schema(
        operation_id="challenges_phases_reveal",
        request=None,
        responses={
            200: RevealOutputSerializer,
            **error_responses(404, 409, _409="`reveal_not_due` (the platform's own call only)."),
        },
        description="Reveal the phase's hidden splits now (hosts and staff; also with "
        "`reveal: never`). Idempotent: asking again answers the same `revealed_at`.",
    )
    def post(self, request: Request, slug: str, phase: str) -> Response:
        result = phase_reveal_request(
            user=self.user, auth=request.auth, slug=slug, phase_slug=phase
        )
        return self.respond(RevealOutputSerializer, result)
