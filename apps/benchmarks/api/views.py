"""Challenges API (SPEC §11.1): apply a bundle, read challenges, public data, take part."""

from __future__ import annotations

from http import HTTPStatus
from pathlib import Path

from django.http import FileResponse
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
)
from rest_framework.request import Request
from rest_framework.response import Response

from apps.benchmarks.api.parsers import BundleMultiPartParser, IncomingBundle
from apps.benchmarks.api.serializers import (
    BundleMultipartSerializer,
    BundleUploadIdSerializer,
    ChallengeApplyInputSerializer,
    ChallengeOutputSerializer,
    DryRunOutputSerializer,
    DryRunQuerySerializer,
    ParticipantOutputSerializer,
)
from apps.benchmarks.exceptions import InvalidBundle
from apps.benchmarks.selectors import challenge_get_visible, challenge_list
from apps.benchmarks.services.apply import challenge_apply
from apps.benchmarks.services.apply_upload import challenge_apply_upload
from apps.benchmarks.services.participants import challenge_participate, participant_approve
from apps.benchmarks.services.public_data import phase_public_data
from apps.core.api.base import ApiView
from apps.core.api.downloads import DOWNLOAD_RESPONSE, attachment_response
from apps.core.api.parsers import BoundedJSONParser
from apps.core.api.schema import error_responses
from apps.submissions.api.views import ClosesUploadsMixin

_BUNDLE_400 = (
    "`invalid_bundle` with `fields` keyed by YAML path (`phases[1].metrics[0].direction`), "
    "`unsafe_archive`."
)


class ChallengeListApi(ClosesUploadsMixin, ApiView):
    parser_classes = [BundleMultiPartParser, BoundedJSONParser]
    token_scopes = {"POST": "host"}

    @extend_schema(
        operation_id="challenges_list",
        responses={200: ChallengeOutputSerializer(many=True), **error_responses()},
    )
    def get(self, request: Request) -> Response:
        return self.respond(ChallengeOutputSerializer, challenge_list(user=self.user), many=True)

    @extend_schema(
        operation_id="challenges_apply",
        request={
            "multipart/form-data": BundleMultipartSerializer,
            "application/json": BundleUploadIdSerializer,
        },
        parameters=[OpenApiParameter("dry_run", bool, required=False)],
        responses={
            200: OpenApiResponse(
                PolymorphicProxySerializer(
                    component_name="ChallengeApplyOrPlan",
                    serializers=[ChallengeOutputSerializer, DryRunOutputSerializer],
                    resource_type_field_name=None,
                ),
                description="Updated (or unchanged) challenge; with `dry_run`, the plan.",
            ),
            201: ChallengeOutputSerializer,
            **error_responses(
                400,
                404,
                409,
                415,
                _400=_BUNDLE_400,
                _404="`not_found`: no such upload of yours.",
                _409="`upload_incomplete`: the upload has not received all its bytes; "
                "`upload_attached`: it was applied already.",
            ),
        },
        description="Apply a bundle (a .zip with challenge.yaml at its root). With `dry_run` "
        "the answer is `{dry_run, slug, plan}` and nothing changes.",
    )
    def post(self, request: Request) -> Response:
        query = self.query(DryRunQuerySerializer)
        data = self.validated(ChallengeApplyInputSerializer, request.data, error=InvalidBundle)
        dry_run = bool(query.get("dry_run") or data.get("dry_run"))
        if "upload_id" in data:
            result = challenge_apply_upload(
                user=self.user, upload_id=data["upload_id"], dry_run=dry_run
            )
        else:
            bundle = request.FILES.get("bundle")
            if not isinstance(bundle, IncomingBundle):
                raise InvalidBundle(
                    "Send the bundle as the multipart file `bundle`.",
                    fields={"bundle": ["is required"]},
                )
            result = challenge_apply(
                user=self.user,
                bundle_path=Path(bundle.temporary_file_path()),
                sha256=bundle.sha256,
                dry_run=dry_run,
            )
        if result.dry_run:
            plan = {
                "dry_run": True,
                "slug": result.slug,
                "plan": [op.as_dict() for op in result.plan],
            }
            return self.respond(DryRunOutputSerializer, plan)
        challenge = challenge_get_visible(slug=result.slug, user=self.user)
        status = HTTPStatus.CREATED if result.created else HTTPStatus.OK
        return self.respond(ChallengeOutputSerializer, challenge, status=status)


class ChallengeDetailApi(ApiView):
    @extend_schema(
        operation_id="challenges_retrieve",
        responses={200: ChallengeOutputSerializer, **error_responses(404)},
    )
    def get(self, request: Request, slug: str) -> Response:
        return self.respond(
            ChallengeOutputSerializer, challenge_get_visible(slug=slug, user=self.user)
        )


class PhasePublicDataApi(ApiView):
    @extend_schema(
        operation_id="challenges_phases_public_data",
        responses={(200, "application/octet-stream"): DOWNLOAD_RESPONSE, **error_responses(404)},
    )
    def get(self, request: Request, slug: str, phase: str) -> FileResponse:
        stream = phase_public_data(user=self.user, slug=slug, phase_slug=phase)
        return attachment_response(stream, filename=f"{slug}-{phase}-public-data.zip", sha256="")


class ChallengeParticipateApi(ApiView):
    @extend_schema(
        operation_id="challenges_participate",
        request=None,
        responses={200: ParticipantOutputSerializer, **error_responses(404)},
    )
    def post(self, request: Request, slug: str) -> Response:
        return self.respond(
            ParticipantOutputSerializer, challenge_participate(user=self.user, slug=slug)
        )


class ParticipantApproveApi(ApiView):
    token_scopes = {"POST": "host"}

    @extend_schema(
        operation_id="challenges_participants_approve",
        request=None,
        responses={200: ParticipantOutputSerializer, **error_responses(404)},
    )
    def post(self, request: Request, slug: str, user_id: int) -> Response:
        participant = participant_approve(user=self.user, slug=slug, user_id=user_id)
        return self.respond(ParticipantOutputSerializer, participant)
