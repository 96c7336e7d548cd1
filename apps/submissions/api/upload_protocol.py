"""The two resumable upload protocols on one resource (SPEC §11.5): what a request's headers
say, and the headers and bodies each protocol's answers carry.

- The IETF draft "Resumable Uploads for HTTP" at interop version 8: `Upload-Complete` and
  `Upload-Offset` (structured-field boolean and integer), `Upload-Length`, `Upload-Limit`,
  appends as `application/partial-upload`, and problem details (RFC 9457) for a mismatching
  offset, a completed upload and an inconsistent length.
- tus 1.0.0 (`Tus-Resumable: 1.0.0`) with creation, creation-with-upload, expiration,
  checksum (sha256) and termination.

A request that carries `Tus-Resumable` speaks tus; any other speaks the draft.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from django.utils.http import http_date

from apps.core.exceptions import DomainError, InvalidRequest
from apps.submissions.exceptions import UploadCompleted, UploadLengthMismatch
from apps.submissions.models import ResumableUpload

TUS_VERSION = "1.0.0"
TUS_EXTENSIONS = "creation,creation-with-upload,expiration,checksum,termination"
DRAFT_INTEROP_VERSION = "8"
DRAFT_APPEND_TYPE = "application/partial-upload"
TUS_APPEND_TYPE = "application/offset+octet-stream"
PROBLEM_TYPES = "https://iana.org/assignments/http-problem-types#"

_INTEGER = re.compile(r"^[0-9]{1,15}$")


class UnsupportedTusVersion(DomainError):
    code = "unsupported_version"
    http_status = HTTPStatus.PRECONDITION_FAILED
    default_message = f"This server speaks tus {TUS_VERSION}."


class UnsupportedMediaType(DomainError):
    code = "unsupported_media_type"
    http_status = HTTPStatus.UNSUPPORTED_MEDIA_TYPE
    default_message = "Wrong Content-Type for an append."


def _bad_header(name: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"{name}: {message}", fields={name: [message]})


@dataclass(frozen=True)
class UploadHeaders:
    """What a request's upload headers say, checked."""

    tus: bool
    offset: int | None
    length: int | None
    complete: bool | None
    content_length: int | None
    content_type: str
    checksum: bytes | None
    metadata: dict[str, str]


def _integer(headers: Mapping[str, str], name: str) -> int | None:
    raw = headers.get(name)
    if raw is None:
        return None
    value = raw.strip()
    if not _INTEGER.match(value):
        raise _bad_header(name, "must be a non-negative integer")
    return int(value)


def _boolean(headers: Mapping[str, str], name: str) -> bool | None:
    raw = headers.get(name)
    if raw is None:
        return None
    value = raw.strip()
    if value not in ("?0", "?1"):
        raise _bad_header(name, "must be ?1 or ?0")
    return value == "?1"


def _checksum(headers: Mapping[str, str]) -> bytes | None:
    raw = headers.get("Upload-Checksum")
    if raw is None:
        return None
    parts = raw.strip().split(" ")
    if len(parts) != 2 or parts[0].lower() != "sha256":
        raise _bad_header("Upload-Checksum", "must be `sha256 <base64 digest>`")
    try:
        digest = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _bad_header("Upload-Checksum", "the digest must be base64") from exc
    if len(digest) != 32:
        raise _bad_header("Upload-Checksum", "a sha256 digest has 32 bytes")
    return digest


def _metadata(headers: Mapping[str, str]) -> dict[str, str]:
    """tus `Upload-Metadata`: `key base64value` pairs separated by commas."""
    raw = headers.get("Upload-Metadata")
    result: dict[str, str] = {}
    if not raw:
        return result
    for pair in raw.split(","):
        parts = pair.strip().split(" ")
        if not parts[0] or len(parts) > 2 or len(result) >= 32:
            raise _bad_header("Upload-Metadata", "must be `key base64value` pairs")
        try:
            value = base64.b64decode(parts[1], validate=True) if len(parts) == 2 else b""
            # NUL goes from keys as from values (PostgreSQL's JSON refuses it).
            key = parts[0].replace("\x00", "")[:100]
            result[key] = value.decode("utf-8")[:1000].replace("\x00", "")
        except (binascii.Error, ValueError) as exc:
            raise _bad_header("Upload-Metadata", "values must be base64 of UTF-8") from exc
    return result


def read_headers(headers: Mapping[str, str], meta: Mapping[str, Any]) -> UploadHeaders:
    tus_version = headers.get("Tus-Resumable")
    tus = tus_version is not None
    if tus and tus_version.strip() != TUS_VERSION:  # type: ignore[union-attr]
        raise UnsupportedTusVersion(headers={"Tus-Version": TUS_VERSION})
    interop = headers.get("Upload-Draft-Interop-Version")
    if not tus and interop is not None and interop.strip() != DRAFT_INTEROP_VERSION:
        raise _bad_header(
            "Upload-Draft-Interop-Version",
            f"this server speaks interop version {DRAFT_INTEROP_VERSION}",
        )
    return UploadHeaders(
        tus=tus,
        offset=_integer(headers, "Upload-Offset"),
        length=_integer(headers, "Upload-Length"),
        complete=None if tus else _boolean(headers, "Upload-Complete"),
        content_length=_integer(
            {"Content-Length": meta.get("CONTENT_LENGTH") or "0"}, "Content-Length"
        ),
        content_type=(headers.get("Content-Type") or "").split(";")[0].strip().lower(),
        checksum=_checksum(headers) if tus else None,
        metadata=_metadata(headers) if tus else {},
    )


def require_append_type(said: UploadHeaders, *, creation: bool) -> bool:
    """Whether the request brings bytes to append; 415 when an append has the wrong type.
    A creation's body is optional (tus: only as `application/offset+octet-stream`)."""
    if said.tus:
        if said.content_type == TUS_APPEND_TYPE:
            return True
        if creation and not said.content_length:
            return False
        raise UnsupportedMediaType(f"tus appends are sent as {TUS_APPEND_TYPE}.")
    if creation:
        return bool(said.content_length)
    if said.content_type != DRAFT_APPEND_TYPE:
        raise UnsupportedMediaType(f"Appends are sent as {DRAFT_APPEND_TYPE}.")
    return True


def upload_limit(max_size: int, expiry_seconds: int) -> str:
    return f"max-size={max_size}, expires={expiry_seconds}"


def state_headers(upload: ResumableUpload, *, tus: bool) -> dict[str, str]:
    """The upload's state as each protocol tells it."""
    headers = {"Upload-Offset": str(upload.offset)}
    if upload.length is not None:
        headers["Upload-Length"] = str(upload.length)
    if tus:
        headers["Upload-Expires"] = http_date(upload.expires_at.timestamp())
    else:
        headers["Upload-Complete"] = "?1" if upload.complete else "?0"
    return headers


def problem_body(error: DomainError) -> dict[str, Any] | None:
    """The draft's problem details for the errors it defines (None for the others), with the
    SPEC §2 members beside them."""
    common = {"success": False, "code": error.code, "error": error.message}
    if error.code == "upload_offset_mismatch":
        return {
            "type": PROBLEM_TYPES + "mismatching-upload-offset",
            "title": "offset from request does not match offset of resource",
            "expected-offset": error.extra.get("expected_offset"),
            "provided-offset": error.extra.get("provided_offset"),
            **common,
        }
    if isinstance(error, UploadCompleted):
        return {
            "type": PROBLEM_TYPES + "completed-upload",
            "title": "upload is already completed",
            **common,
        }
    if isinstance(error, UploadLengthMismatch):
        return {
            "type": PROBLEM_TYPES + "inconsistent-upload-length",
            "title": "inconsistent length values for upload",
            **common,
        }
    return None
