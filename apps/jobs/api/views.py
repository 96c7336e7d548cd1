from __future__ import annotations

from http import HTTPStatus

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.base import ApiView
from apps.core.api.schema import error_responses
from apps.core.readers import READER_SCOPE, job_get_readable
from apps.jobs.api.serializers import (
    IDEMPOTENCY_KEY_SCHEMA,
    JobListQuerySerializer,
    JobLogsOutputSerializer,
    JobOutputSerializer,
    JobReplayOutputSerializer,
    JobSubmitInputSerializer,
    JobSubmitOutputSerializer,
    submit_input_plain,
    submit_output,
)
from apps.jobs.selectors import job_get, job_list
from apps.jobs.services import job_cancel, job_submit

_SUBMIT_400 = (
    "`invalid_request` (with `fields`), `invalid_idempotency_key`, `idempotency_key_mismatch`, "
    "`missing_files` (with `missing_files`)."
)
_SUBMIT_409 = (
    "`idempotency_request_in_progress` (retry with the same key), `invalid_transition` (the "
    "submission is not a draft), `duplicate_in_flight`, `reservation_not_active`, "
    "`phase_closed` (a phase submission outside its phase's [start, end))."
)
_SUBMIT_429 = (
    "`quota_exceeded`, `rate_limited` (with a `Retry-After` header), `cost_limit_exceeded`."
)


class JobListCreateApi(ApiView):
    """List your jobs, or enqueue a job for one of your draft submissions."""

    @extend_schema(
        operation_id="jobs_list",
        parameters=[JobListQuerySerializer],
        responses={200: JobOutputSerializer(many=True), **error_responses(400)},
    )
    def get(self, request: Request) -> Response:
        query = self.query(JobListQuerySerializer)
        jobs = job_list(user=self.user, status=query.get("status"))
        return self.respond(JobOutputSerializer, jobs, many=True)

    @extend_schema(
        operation_id="jobs_submit",
        request=JobSubmitInputSerializer,
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                IDEMPOTENCY_KEY_SCHEMA,
                OpenApiParameter.HEADER,
                required=False,
                description="Alternative to the body's `idempotency_key`.",
            )
        ],
        responses={
            201: OpenApiResponse(JobSubmitOutputSerializer, description="A new job."),
            200: OpenApiResponse(
                JobReplayOutputSerializer,
                description="Replay of the key's job (header `Idempotent-Replayed: true`).",
            ),
            **error_responses(
                400,
                403,
                404,
                409,
                415,
                422,
                429,
                _400=_SUBMIT_400,
                _409=_SUBMIT_409,
                _429=_SUBMIT_429,
            ),
        },
    )
    def post(self, request: Request) -> Response:
        values = submit_input_plain(request.data)
        if values is None:
            values = self.body(JobSubmitInputSerializer)
        result = job_submit(
            user=self.user,
            submission_id=values["submission_id"],
            config=values.get("config"),
            reservation_id=values.get("reservation_id") or None,
            idempotency_key=values.get("idempotency_key"),
            idempotency_key_header=request.headers.get("Idempotency-Key"),
            idempotency_ttl_hours=values.get("idempotency_ttl_hours"),
        )
        # The body of JobReplayOutputSerializer / JobSubmitOutputSerializer, built directly.
        if not result.created:
            return Response(submit_output(result), headers={"Idempotent-Replayed": "true"})
        return Response(submit_output(result), status=HTTPStatus.CREATED)


class JobDetailApi(ApiView):
    @extend_schema(
        operation_id="jobs_retrieve",
        responses={200: JobOutputSerializer, **error_responses(403, 404)},
    )
    def get(self, request: Request, job_id: str) -> Response:
        return self.respond(JobOutputSerializer, job_get(job_id=job_id, user=self.user))


class JobCancelApi(ApiView):
    @extend_schema(
        operation_id="jobs_cancel",
        request=None,
        responses={
            200: JobOutputSerializer,
            **error_responses(
                403, 404, 409, _409="`invalid_transition`: the job already finished."
            ),
        },
    )
    def post(self, request: Request, job_id: str) -> Response:
        return self.respond(JobOutputSerializer, job_cancel(job_id=job_id, user=self.user))


class JobLogsApi(ApiView):
    """The grader's output of a job whose submission you may read (yours; as a reviewer, one
    awaiting review or that you claimed or judged; staff: any)."""

    @extend_schema(
        operation_id="jobs_logs",
        responses={
            200: JobLogsOutputSerializer,
            **error_responses(
                403,
                404,
                _403="`permission_denied`: someone else's job that you may not read; "
                "`insufficient_scope`: the token lacks `read`, or `review` for someone "
                "else's job.",
            ),
        },
    )
    def get(self, request: Request, job_id: str) -> Response:
        job, readable = job_get_readable(job_id=job_id, user=self.user)
        if not readable.as_owner:
            self.scope_require(READER_SCOPE)
        return self.respond(JobLogsOutputSerializer, job)
