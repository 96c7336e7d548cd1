"""Submissions API (SPEC §4): one view per path (GET and POST of a path share it); each method
validates input, calls one service or selector and renders the answer."""

from __future__ import annotations

from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from django.http import FileResponse, QueryDict
from django.utils.datastructures import MultiValueDict
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.base import ApiView
from apps.core.api.downloads import DOWNLOAD_RESPONSE, attachment_response
from apps.core.api.pagination import PageQuerySerializer, page_of
from apps.core.api.parsers import BoundedJSONParser
from apps.core.api.schema import error_responses
from apps.core.exceptions import InvalidRequest
from apps.core.readers import READER_SCOPE, submission_get_readable
from apps.submissions.api.parsers import SingleFileMultiPartParser, StreamingMultiPartParser
from apps.submissions.api.serializers import (
    SubmissionCreateFromUploadInputSerializer,
    SubmissionCreateInputSerializer,
    SubmissionFileAddInputSerializer,
    SubmissionFileAttachInputSerializer,
    SubmissionFileListOutputSerializer,
    SubmissionFileOutputSerializer,
    SubmissionOutputSerializer,
    SubmissionPageOutputSerializer,
)
from apps.submissions.files import submission_file_get, submission_file_open
from apps.submissions.selectors import (
    submission_file_list,
    submission_get,
    submission_list_with_files,
)
from apps.submissions.services.attach import submission_file_attach
from apps.submissions.services.create_upload import submission_create_from_upload
from apps.submissions.services.drafts import (
    submission_assert_open_for_upload,
    submission_create,
    submission_file_add,
)
from apps.submissions.uploads import IncomingFile

CHECKSUM_HEADER = OpenApiParameter(
    name="X-Content-SHA256",
    type=OpenApiTypes.STR,
    location=OpenApiParameter.HEADER,
    required=False,
    description="SHA-256 of the file (hex, any case). A mismatch answers `checksum_mismatch` "
    "and nothing is kept.",
)
UPLOAD_400 = (
    "`invalid_request`, `invalid_filename`, `invalid_extension`, `file_too_large`, "
    "`checksum_mismatch`, `duplicate_filename`, `too_many_files`, `invalid_archive`, "
    "`unsafe_archive`."
)

STORAGE_429 = (
    "`storage_quota_exceeded`: your stored files would pass QUOTA_MAX_STORAGE_BYTES (the body "
    "has `storage_bytes`, `max_storage_bytes`)."
)


def _incoming(files: list[Any]) -> list[IncomingFile]:
    uploads = [f for f in files if isinstance(f, IncomingFile)]
    if len(uploads) != len(files):
        raise InvalidRequest("Files must be sent as multipart file parts.")
    return uploads


class ClosesUploadsMixin:
    """Close (and so delete) every uploaded temporary file when the response is ready.

    DRF keeps parsed files on its own Request, where Django's end-of-request cleanup does not
    see them; without this, a refused upload's temporary file stays open until the garbage
    collector finds it.
    """

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        files = getattr(request, "_files", None)
        if isinstance(files, MultiValueDict):
            for _, uploads in files.lists():
                for upload in uploads:
                    upload.close()
        return super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc,no-any-return]


class SubmissionListCreateApi(ClosesUploadsMixin, ApiView):
    """GET: your submissions, newest first (limit/offset pagination).
    POST: create a draft submission with its first file (or, in bulk mode, all files), or
    with a finished resumable upload as its first file (`upload_id` and `filename`, in a form
    or a JSON body); with `challenge` and `phase`, a submission to that phase."""

    parser_classes = [StreamingMultiPartParser, BoundedJSONParser]
    # The phase named in the body decides the extensions: the service checks them.
    upload_file_types: Sequence[str] | None = None

    @extend_schema(
        operation_id="submissions_list",
        parameters=[PageQuerySerializer],
        responses={200: SubmissionPageOutputSerializer, **error_responses(400)},
    )
    def get(self, request: Request) -> Response:
        page = self.query(PageQuerySerializer)
        submissions = submission_list_with_files(user=self.user)
        return self.respond(
            SubmissionPageOutputSerializer, page_of(submissions, request=request, **page)
        )

    @extend_schema(
        operation_id="submissions_create",
        request={
            "multipart/form-data": SubmissionCreateInputSerializer,
            "application/json": SubmissionCreateFromUploadInputSerializer,
        },
        parameters=[CHECKSUM_HEADER],
        responses={
            201: SubmissionOutputSerializer,
            **error_responses(
                400,
                403,
                404,
                409,
                413,
                415,
                429,
                _400=UPLOAD_400,
                _403="`not_participant`: you are not an approved participant of the challenge.",
                _404="`not_found`: no such challenge (or one you may not see), or no such "
                "phase; or no such upload of yours (`upload_id`).",
                _409="`phase_closed`: the phase does not accept submissions now (outside "
                "[start, end)); `upload_incomplete`: the upload has not received all its "
                "bytes; `upload_attached`: the upload already became a file or a bundle.",
                _413="`request_too_large`: more than MAX_SUBMISSION_REQUEST_SIZE bytes of files "
                "in one request (add the rest file by file).",
                _429=STORAGE_429,
            ),
        },
    )
    def post(self, request: Request) -> Response:
        # A JSON body can only name an upload (files are never sent in JSON).
        sent = request.data
        if not isinstance(sent, QueryDict) or "upload_id" in sent or "filename" in sent:
            data = self.body(SubmissionCreateFromUploadInputSerializer)
            submission = submission_create_from_upload(
                upload_id=data["upload_id"],
                filename=data["filename"],
                **self._create_fields(request, data),
            )
        else:
            data = self.body(SubmissionCreateInputSerializer)
            submission = submission_create(**self._create_fields(request, data))
        submission = submission_get(submission_id=submission.pk, user=self.user)
        return self.respond(SubmissionOutputSerializer, submission, status=HTTPStatus.CREATED)

    def _create_fields(self, request: Request, data: dict[str, Any]) -> dict[str, Any]:
        """What both ways of creating a submission take from the request."""
        return {
            "user": self.user,
            "uploads": _incoming(request.FILES.getlist("files")),
            "entrypoint": data["entrypoint"],
            "config_file": data["config_file"],
            "metadata": data.get("metadata") or {},
            "question_id": data["question_id"],
            "skill": data["skill"],
            "challenge": data["challenge"],
            "phase": data["phase"],
            "expected_sha256": request.headers.get("X-Content-SHA256"),
        }


READ_403 = (
    "`permission_denied`: someone else's submission that you may not read (readers are its "
    "owner, staff, and reviewers while it awaits review or once they claimed or judged it); "
    "`insufficient_scope`: the token lacks `read`, or `review` for someone else's submission."
)


class ReaderMixin:
    """Views that show a submission's content to whoever may read it (`apps.core.readers`):
    a token reading someone else's submission needs the `review` scope besides `read`."""

    def readable(self, submission_id: str) -> Any:
        view: Any = self
        readable = submission_get_readable(submission_id=submission_id, user=view.user)
        if not readable.as_owner:
            view.scope_require(READER_SCOPE)
        return readable


class SubmissionDetailApi(ReaderMixin, ApiView):
    """A submission you may read, with its files in upload order."""

    @extend_schema(
        operation_id="submissions_retrieve",
        responses={200: SubmissionOutputSerializer, **error_responses(403, 404, _403=READ_403)},
    )
    def get(self, request: Request, submission_id: str) -> Response:
        return self.respond(SubmissionOutputSerializer, self.readable(submission_id).submission)


class SubmissionFileDownloadApi(ReaderMixin, ApiView):
    """One file of a submission you may read, as an attachment (streamed from storage; never
    rendered by a browser)."""

    @extend_schema(
        operation_id="submissions_files_download",
        responses={
            (200, "application/octet-stream"): DOWNLOAD_RESPONSE,
            **error_responses(403, 404, _403=READ_403),
        },
    )
    def get(self, request: Request, submission_id: str, file_id: int) -> FileResponse:
        readable = self.readable(submission_id)
        file = submission_file_get(submission=readable.submission, file_id=file_id)
        stream = submission_file_open(file=file)
        return attachment_response(stream, filename=file.filename, sha256=file.sha256)


class SubmissionFileListCreateApi(ReaderMixin, ClosesUploadsMixin, ApiView):
    """GET: the files of a submission you may read, in upload order, each with its download
    path. POST: add one file to your draft (streamed), or attach a finished resumable upload
    (JSON `{"upload_id", "filename"}`)."""

    parser_classes = [SingleFileMultiPartParser, BoundedJSONParser]
    upload_file_types: Sequence[str] | None = ()

    @extend_schema(
        operation_id="submissions_files_list",
        responses={
            200: SubmissionFileListOutputSerializer,
            **error_responses(403, 404, _403=READ_403),
        },
    )
    def get(self, request: Request, submission_id: str) -> Response:
        files = submission_file_list(submission=self.readable(submission_id).submission)
        return self.respond(SubmissionFileListOutputSerializer, {"files": files})

    @extend_schema(
        operation_id="submissions_files_create",
        request={
            "multipart/form-data": SubmissionFileAddInputSerializer,
            "application/json": SubmissionFileAttachInputSerializer,
        },
        parameters=[CHECKSUM_HEADER],
        responses={
            201: SubmissionFileOutputSerializer,
            200: SubmissionFileOutputSerializer,
            **error_responses(
                400,
                403,
                404,
                409,
                415,
                429,
                _400=UPLOAD_400,
                _409="`submission_sealed`: a job was created for the submission; "
                "`upload_incomplete`: the upload has not received all its bytes; "
                "`upload_attached`: the upload already became a file or a bundle.",
                _429=STORAGE_429,
            ),
        },
        description="Add one file. Re-sending a stored name with the same content answers 200 "
        "with the stored file (a safe retry).",
    )
    def post(self, request: Request, submission_id: str) -> Response:
        if (request.content_type or "").startswith("application/json"):
            data = self.body(SubmissionFileAttachInputSerializer)
            attached = submission_file_attach(
                user=self.user,
                submission_id=submission_id,
                upload_id=data["upload_id"],
                filename=data["filename"],
            )
            return self.respond(
                SubmissionFileOutputSerializer,
                attached.file,
                status=HTTPStatus.CREATED if attached.created else HTTPStatus.OK,
            )
        # Refuse an unknown, foreign or sealed submission before reading the body, whose
        # files' extensions are then checked as they arrive (the submission's file types).
        submission = submission_assert_open_for_upload(user=self.user, submission_id=submission_id)
        self.upload_file_types = tuple(submission.file_types)
        self.body(SubmissionFileAddInputSerializer)
        uploads = _incoming(request.FILES.getlist("file"))
        if len(uploads) != 1:
            raise InvalidRequest(
                "Send exactly one file per request.",
                fields={"file": ["Send exactly one file per request."]},
            )
        result = submission_file_add(
            user=self.user,
            submission_id=submission_id,
            upload=uploads[0],
            expected_sha256=request.headers.get("X-Content-SHA256"),
        )
        return self.respond(
            SubmissionFileOutputSerializer,
            result.file,
            status=HTTPStatus.CREATED if result.created else HTTPStatus.OK,
        )
