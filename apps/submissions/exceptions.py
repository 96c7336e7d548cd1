"""Refusals of the submissions app, each with the SPEC §4 error code."""

from __future__ import annotations

from http import HTTPStatus

from apps.core.exceptions import DomainError


class FileTooLarge(DomainError):
    code = "file_too_large"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "The file is larger than the upload limit."


class InvalidExtension(DomainError):
    code = "invalid_extension"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "This file type is not accepted."


class InvalidFilename(DomainError):
    code = "invalid_filename"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "The file name must be a plain base name."


class DuplicateFilename(DomainError):
    code = "duplicate_filename"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "A file with this name is already in the submission."


class InvalidArchive(DomainError):
    code = "invalid_archive"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "The archive cannot be read."


class UnsafeArchive(DomainError):
    code = "unsafe_archive"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "The archive contains a member that is not a plain file or folder."


class ChecksumMismatch(DomainError):
    code = "checksum_mismatch"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "The file's SHA-256 does not match X-Content-SHA256."


class TooManyFiles(DomainError):
    code = "too_many_files"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "The submission has reached its maximum number of files."


class SubmissionSealed(DomainError):
    code = "submission_sealed"
    http_status = HTTPStatus.CONFLICT
    default_message = (
        "The submission is sealed: a job was created for it, files can no longer change."
    )


class RequestTooLarge(DomainError):
    """One create request carries more file bytes than `MAX_SUBMISSION_REQUEST_SIZE`."""

    code = "request_too_large"
    http_status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    default_message = "The request carries more bytes than one request may."


# --- Resumable uploads (SPEC §11.5) ------------------------------------------------------------


class UploadIncomplete(DomainError):
    code = "upload_incomplete"
    http_status = HTTPStatus.CONFLICT
    default_message = "The upload has not received all its bytes yet."


class UploadAttached(DomainError):
    code = "upload_attached"
    http_status = HTTPStatus.CONFLICT
    default_message = "The upload's bytes already became a file or a bundle."


class TooManyUploads(DomainError):
    code = "too_many_uploads"
    http_status = HTTPStatus.TOO_MANY_REQUESTS
    default_message = "Too many open uploads (UPLOAD_MAX_OPEN_PER_USER)."


class UploadTooLarge(DomainError):
    code = "upload_too_large"
    http_status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    default_message = "The upload is larger than MAX_RESUMABLE_UPLOAD_SIZE."


class UploadOffsetMismatch(DomainError):
    """The request's `Upload-Offset` is not where the stored bytes end (or another request is
    appending right now). `extra` has `expected_offset` and `provided_offset`."""

    code = "upload_offset_mismatch"
    http_status = HTTPStatus.CONFLICT
    default_message = "Upload-Offset does not match the stored bytes."

    def __init__(self, *, expected: int, provided: int | None, busy: bool = False) -> None:
        message = (
            "Another request is appending to this upload; ask for the offset and resume."
            if busy
            else f"The upload's stored bytes end at {expected}, not {provided}."
        )
        super().__init__(
            message,
            extra={"expected_offset": expected, "provided_offset": provided},
            headers={"Upload-Offset": str(expected)},
        )
        self.expected = expected
        self.provided = provided


class UploadCompleted(DomainError):
    code = "upload_completed"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "The upload is complete: it takes no more bytes."


class UploadLengthMismatch(DomainError):
    code = "upload_length_mismatch"
    http_status = HTTPStatus.BAD_REQUEST
    default_message = "The upload's length is inconsistent with what was stated before."


class UploadChecksumMismatch(DomainError):
    """tus checksum extension: the request body's digest differs (status 460); its bytes are
    dropped."""

    code = "checksum_mismatch"
    http_status = 460
    default_message = "The request body does not match its Upload-Checksum; nothing was kept."


class UploadStorageUnavailable(DomainError):
    """The object store refused or dropped an append's bytes (an S3 part that could not be
    sent). What the upload's offset says is stored stays stored: ask for it and resume."""

    code = "service_unavailable"
    http_status = HTTPStatus.SERVICE_UNAVAILABLE
    default_message = (
        "The storage did not take the upload's bytes; ask for the upload's offset and resume."
    )

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, headers={"Retry-After": "1"})
