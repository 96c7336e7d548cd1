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
