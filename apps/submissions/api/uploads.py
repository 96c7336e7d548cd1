"""Resumable uploads API (SPEC §11.5): `/api/uploads/` and `/api/uploads/{upload_id}/`, both
protocols on the same resources (`upload_protocol`). Each method reads the headers, calls one
service and answers in the request's protocol; errors the protocols define take their form
(the draft's problem details, tus's status and headers), every other the SPEC §2 body."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.base import ApiView
from apps.core.api.schema import error_responses
from apps.core.exceptions import DomainError, InvalidRequest
from apps.submissions.api.serializers import UploadOutputSerializer
from apps.submissions.api.upload_protocol import (
    TUS_EXTENSIONS,
    TUS_VERSION,
    UploadHeaders,
    problem_body,
    read_headers,
    require_append_type,
    state_headers,
    upload_limit,
)
from apps.submissions.models import ResumableUpload
from apps.submissions.resumable.selectors import upload_get
from apps.submissions.resumable.services import (
    AppendRequest,
    max_upload_size,
    upload_append,
    upload_delete,
    upload_start,
)


def _header(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(
        name=name,
        type=OpenApiTypes.STR,
        location=OpenApiParameter.HEADER,
        required=False,
        description=description,
    )


PROTOCOL_HEADERS = [
    _header("Upload-Complete", "Draft: `?1` when this request ends the upload, else `?0`."),
    _header("Upload-Draft-Interop-Version", "Draft: the interop version (8)."),
    _header("Upload-Offset", "Where this request's bytes start (appends)."),
    _header("Upload-Length", "The upload's total length, when known."),
    _header("Tus-Resumable", "tus: `1.0.0` (the request then speaks tus)."),
    _header("Upload-Metadata", "tus: `key base64value` pairs (e.g. `filename`)."),
    _header("Upload-Checksum", "tus: `sha256 <base64 digest>` of this request's body."),
]
TUS_412 = (
    "`unsupported_version`: a `Tus-Resumable` other than 1.0.0 (the answer has `Tus-Version`)."
)
ERRORS = error_responses(
    400,
    404,
    409,
    412,
    413,
    415,
    429,
    503,
    _400="`invalid_request` (a bad header), `upload_completed`, `upload_length_mismatch` (the "
    "draft answers these two as problem details).",
    _404="`not_found`: no such upload of yours (another user's, expired, or deleted).",
    _409="`upload_offset_mismatch`: `Upload-Offset` is not where the stored bytes end, or "
    "another request is appending; the answer's `Upload-Offset` is the right one (draft: "
    "problem details with `expected-offset`).",
    _412=TUS_412,
    _413="`upload_too_large`: `Upload-Length` over MAX_RESUMABLE_UPLOAD_SIZE.",
    _415="`unsupported_media_type`: an append not sent as `application/partial-upload` "
    "(draft) or `application/offset+octet-stream` (tus).",
    _429="`storage_quota_exceeded`: the bytes would pass QUOTA_MAX_STORAGE_BYTES; "
    "`too_many_uploads`: UPLOAD_MAX_OPEN_PER_USER uploads are open already (creation).",
    _503="`service_unavailable` (with `Retry-After`): on S3, a part the store refused or could "
    "not be reached for; the saved offset (HEAD) still names stored bytes: resume from it.",
)


def _limits() -> dict[str, str]:
    expiry = int(float(settings.UPLOAD_EXPIRY_HOURS) * 3600)
    return {
        "Upload-Limit": upload_limit(max_upload_size(), expiry),
        "Tus-Resumable": TUS_VERSION,
        "Tus-Version": TUS_VERSION,
        "Tus-Extension": TUS_EXTENSIONS,
        "Tus-Max-Size": str(max_upload_size()),
        "Tus-Checksum-Algorithm": "sha256",
    }


class UploadApiBase(ApiView):
    """The protocol plumbing shared by both paths."""

    # The body is the upload's bytes: read as a stream by the service, never parsed (so these
    # routes are in UPLOAD_URL_NAMES, tests/core/test_body_limits.py).
    parser_classes: list[Any] = []
    streams_request_body = True
    said: UploadHeaders | None = None
    # Discovery (the limits and the protocol's capabilities) needs no credentials, as tus
    # clients expect; every other method needs a user and a scope.
    public_methods = frozenset({"OPTIONS"})

    def get_permissions(self) -> list[BasePermission]:
        if (self.request.method or "").upper() in self.public_methods:
            return [AllowAny()]
        return super().get_permissions()  # type: ignore[return-value]

    @classmethod
    def scope_for(cls, method: str, body: Any = None) -> str | None:
        if method.upper() in cls.public_methods:
            return None
        return super().scope_for(method, body)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        method = (request.method or "").lower()
        if method in self.http_method_names and hasattr(self, method):
            self.said = read_headers(request.headers, request.META)

    @property
    def speaks_tus(self) -> bool:
        return "Tus-Resumable" in self.request.headers

    def handle_exception(self, exc: Exception) -> Response:
        response = super().handle_exception(exc)
        if isinstance(exc, DomainError) and not self.speaks_tus:
            problem = problem_body(exc)
            if problem is not None:
                response.data = problem
                response.content_type = "application/problem+json"
        return response

    def finalize_response(
        self, request: Request, response: Any, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        if self.speaks_tus:
            response["Tus-Resumable"] = TUS_VERSION
        if (request.method or "").upper() in ("HEAD", "GET"):
            response["Cache-Control"] = "no-store"
        return response  # type: ignore[no-any-return]

    def options(self, request: Any, *args: Any, **kwargs: Any) -> Response:
        return Response(status=HTTPStatus.NO_CONTENT, headers=_limits())

    def append_request(self, said: UploadHeaders, *, creation: bool) -> AppendRequest | None:
        brings_bytes = require_append_type(said, creation=creation)
        if said.tus and not brings_bytes:
            return None
        return AppendRequest(
            offset=0 if creation else said.offset or 0,
            body=self.request._request,  # the WSGI body, read as it arrives
            content_length=said.content_length if brings_bytes else 0,
            complete=said.complete,
            length=said.length,
            checksum=said.checksum,
        )

    def state(self, upload: ResumableUpload, status: int, *, body: bool = False) -> Response:
        assert self.said is not None  # noqa: S101 - set in initial()
        headers = state_headers(upload, tus=self.said.tus)
        if status == HTTPStatus.CREATED:
            headers["Location"] = self.request.build_absolute_uri(
                reverse("upload-detail", kwargs={"upload_id": upload.pk})
            )
            if not self.said.tus:
                headers["Upload-Limit"] = _limits()["Upload-Limit"]
        data = UploadOutputSerializer(upload).data if body else None
        return Response(data, status=status, headers=headers)


class UploadListApi(UploadApiBase):
    """POST: create a resumable upload (draft: with `Upload-Complete`, its first bytes
    optional; tus: with `Upload-Length`, its first bytes optional as
    `application/offset+octet-stream`). OPTIONS: the limits and the tus capabilities."""

    @extend_schema(
        operation_id="uploads_create",
        request={"application/octet-stream": OpenApiTypes.BINARY},
        parameters=PROTOCOL_HEADERS,
        responses={201: UploadOutputSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        said = self.said
        assert said is not None  # noqa: S101 - set in initial()
        if said.tus and said.length is None:
            raise InvalidRequest(
                "Upload-Length is required (deferred lengths are not supported).",
                fields={"Upload-Length": ["is required"]},
            )
        if not said.tus and said.complete is None:
            raise InvalidRequest(
                "Send Upload-Complete (resumable uploads draft) or Tus-Resumable: 1.0.0 (tus).",
                fields={"Upload-Complete": ["is required"]},
            )
        upload = upload_start(
            user=self.user,
            length=said.length,
            metadata=said.metadata,
            first=self.append_request(said, creation=True),
        )
        return self.state(upload, HTTPStatus.CREATED, body=True)


class UploadDetailApi(UploadApiBase):
    """One of your uploads. HEAD: its offset (both protocols). PATCH: append at
    `Upload-Offset`, the body sent as `application/partial-upload` (draft) or
    `application/offset+octet-stream` (tus); any other type is refused with 415. DELETE:
    cancel it (its bytes go). GET: its state as JSON."""

    @extend_schema(
        operation_id="uploads_retrieve",
        responses={200: UploadOutputSerializer, **error_responses(400, 404, 412, _412=TUS_412)},
    )
    def get(self, request: Request, upload_id: str) -> Response:
        upload = upload_get(upload_id=upload_id, user=self.user)
        return Response(UploadOutputSerializer(upload).data)

    def head(self, request: Request, upload_id: str) -> Response:
        upload = upload_get(upload_id=upload_id, user=self.user)
        assert self.said is not None  # noqa: S101 - set in initial()
        return self.state(upload, HTTPStatus.OK if self.said.tus else HTTPStatus.NO_CONTENT)

    @extend_schema(
        operation_id="uploads_append",
        request={"application/octet-stream": OpenApiTypes.BINARY},
        parameters=PROTOCOL_HEADERS,
        responses={
            200: UploadOutputSerializer,
            204: OpenApiResponse(description="Appended; `Upload-Offset` is the new offset."),
            **ERRORS,
            460: OpenApiResponse(description="tus: the body does not match Upload-Checksum."),
        },
    )
    def patch(self, request: Request, upload_id: str) -> Response:
        said = self.said
        assert said is not None  # noqa: S101 - set in initial()
        if said.offset is None:
            raise InvalidRequest(
                "Upload-Offset is required.", fields={"Upload-Offset": ["is required"]}
            )
        if not said.tus and said.complete is None:
            raise InvalidRequest(
                "Upload-Complete is required.", fields={"Upload-Complete": ["is required"]}
            )
        append = self.append_request(said, creation=False)
        assert append is not None  # noqa: S101 - an append always brings a body
        upload = upload_append(user=self.user, upload_id=upload_id, request=append)
        if upload.complete and not said.tus:
            return self.state(upload, HTTPStatus.OK, body=True)
        return self.state(upload, HTTPStatus.NO_CONTENT)

    @extend_schema(
        operation_id="uploads_destroy",
        responses={204: None, **error_responses(400, 404, 409, 412, _412=TUS_412)},
    )
    def delete(self, request: Request, upload_id: str) -> Response:
        upload_delete(user=self.user, upload_id=upload_id)
        return Response(status=HTTPStatus.NO_CONTENT)
