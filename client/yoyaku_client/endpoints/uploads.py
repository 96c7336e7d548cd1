"""`/api/uploads/`: resumable uploads for large files, spoken as the IETF draft "Resumable
Uploads for HTTP" at interop version 8.

A file goes up in three kinds of request:

1. `POST /api/uploads/` with `Upload-Complete: ?0` and `Upload-Length` (no body) creates
   the upload (201, its id in the body and `Location`);
2. `PATCH /api/uploads/{id}/` with `Content-Type: application/partial-upload` and
   `Upload-Offset` appends the bytes from that offset (`Upload-Complete: ?1` on the last);
3. `HEAD /api/uploads/{id}/` tells the offset the server has durably stored: where a
   resumed upload (a lost connection, a killed and re-run client) carries on. A PATCH at a
   wrong offset is answered 409 with the right one (`expected-offset`), and the upload
   carries on from there.

A finished upload becomes a file of a submission (`attach_upload`) or a challenge's bundle
(`push_bundle(upload_id=...)`). Limits: `upload_limits()` (from `GET /api/quotas/me/`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yoyaku_client.endpoints.base import ApiBase
from yoyaku_client.errors import (
    ApiError,
    ConflictError,
    NotFound,
    ServerError,
    TransportError,
    YoyakuError,
)
from yoyaku_client.models import UploadedFile
from yoyaku_client.multipart import ProgressCallback
from yoyaku_client.record import Record
from yoyaku_client.transport import Safety

if TYPE_CHECKING:
    import httpx

__all__ = [
    "DRAFT_INTEROP_VERSION",
    "PARTIAL_UPLOAD",
    "ResumableStatus",
    "UploadLimits",
    "UploadsApi",
    "chunk_size",
]

DRAFT_INTEROP_VERSION = "8"
PARTIAL_UPLOAD = "application/partial-upload"
#: Bytes per PATCH unless `YOYAKU_UPLOAD_CHUNK_SIZE` says otherwise: a lost connection costs
#: at most the PATCH it interrupted (the server keeps what it durably stored of it).
DEFAULT_CHUNK_SIZE = 64 * 1024 * 1024
_READ_SIZE = 1024 * 1024
#: MAX_UPLOAD_FILE_SIZE's default, for a server that does not tell its own.
DEFAULT_MAX_UPLOAD_FILE_SIZE = 104_857_600


def _local_max_file_size() -> int:
    raw = os.environ.get("YOYAKU_MAX_FILE_SIZE", "")
    return int(raw) if raw.isdigit() else DEFAULT_MAX_UPLOAD_FILE_SIZE


def chunk_size() -> int:
    raw = os.environ.get("YOYAKU_UPLOAD_CHUNK_SIZE", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_CHUNK_SIZE


@dataclass(frozen=True, eq=False, repr=False)
class UploadLimits(Record):
    """The server's upload limits: a file above `max_upload_file_size` goes resumably, up to
    `max_resumable_upload_size` (None: the server has no resumable uploads)."""

    max_upload_file_size: int
    max_resumable_upload_size: int | None


@dataclass(frozen=True, eq=False, repr=False)
class ResumableStatus(Record):
    """An upload's state on the server: `offset` bytes durably stored of `length`."""

    upload_id: str
    offset: int
    length: int | None
    complete: bool
    #: Where this client's run found the upload (0 for a new one): bytes it did not send.
    resumed_from: int = 0
    sha256: str = ""


def _header_int(response: httpx.Response, name: str) -> int | None:
    raw = response.headers.get(name, "").strip()
    return int(raw) if raw.isascii() and raw.isdigit() else None  # "²" is a digit to isdigit


def _status(upload_id: str, response: httpx.Response, body: dict[str, Any]) -> ResumableStatus:
    offset = _header_int(response, "Upload-Offset")
    if offset is None:
        offset = int(body.get("offset") or 0)
    length = _header_int(response, "Upload-Length")
    if length is None and isinstance(body.get("length"), int):
        length = int(body["length"])
    flag = response.headers.get("Upload-Complete", "").strip()
    complete = flag == "?1" if flag else bool(body.get("complete"))
    return ResumableStatus(
        upload_id=upload_id,
        offset=offset,
        length=length,
        complete=complete,
        sha256=str(body.get("sha256") or ""),
    )


def _json_body(response: httpx.Response) -> dict[str, Any]:
    if not response.content:
        return {}
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


class _Slice:
    """The bytes of `path` from `start` to `end`, read while they are sent; `close()` closes
    the file (the transport calls it after each attempt)."""

    def __init__(self, path: Path, start: int, end: int, progress: ProgressCallback | None):
        self.path, self.start, self.end = path, start, end
        self.progress = progress
        self.total = os.stat(path).st_size
        self._handle: Any = None

    def __iter__(self) -> Iterator[bytes]:
        self._handle = open(self.path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
        self._handle.seek(self.start)
        position = self.start
        while position < self.end:
            chunk = self._handle.read(min(_READ_SIZE, self.end - position))
            if not chunk:
                raise OSError(f"{self.path} shrank while it was being sent")
            position += len(chunk)
            yield chunk
            if self.progress is not None:
                self.progress(position, self.total)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


class UploadsApi(ApiBase):
    """Resumable uploads (the IETF draft, interop version 8)."""

    def upload_limits(self) -> UploadLimits:
        """The server's limits (`GET /api/quotas/me/`). A server that does not tell
        `max_upload_file_size` has no resumable uploads: the local default is used."""
        data = self._json("GET", "/quotas/me/")
        simple = data.get("max_upload_file_size")
        resumable = data.get("max_resumable_upload_size")
        return UploadLimits(
            max_upload_file_size=simple if isinstance(simple, int) else _local_max_file_size(),
            max_resumable_upload_size=resumable if isinstance(resumable, int) else None,
        )

    def create_upload(self, *, length: int) -> ResumableStatus:
        """`POST /api/uploads/` (`Upload-Complete: ?0`, no bytes yet). Repeated after a lost
        answer: the first attempt's upload, if made, holds no bytes and expires unused."""
        headers = {
            "Upload-Draft-Interop-Version": DRAFT_INTEROP_VERSION,
            "Upload-Complete": "?0",
            "Upload-Length": str(length),
            "Content-Length": "0",
        }
        response = self.transport.request(
            "POST", "/uploads/", body=lambda: (headers, []), safety=Safety.SAFE
        )
        body = _json_body(response)
        upload_id = str(body.get("upload_id") or "")
        if not upload_id:
            location = response.headers.get("Location", "").rstrip("/")
            upload_id = location.rsplit("/", 1)[-1]
        if not upload_id:
            raise YoyakuError("the server created an upload but did not say where")
        return _status(upload_id, response, body)

    def upload_status(self, upload_id: str) -> ResumableStatus:
        """`HEAD /api/uploads/{id}/`: the offset durably stored (404 once it expired)."""
        response = self.transport.request(
            "HEAD",
            f"/uploads/{upload_id}/",
            headers={"Upload-Draft-Interop-Version": DRAFT_INTEROP_VERSION},
        )
        return _status(upload_id, response, {})

    def append_upload(
        self,
        upload_id: str,
        path: Path | str,
        *,
        offset: int,
        end: int,
        complete: bool,
        progress: ProgressCallback | None = None,
    ) -> ResumableStatus:
        """`PATCH /api/uploads/{id}/`: the bytes of `path` from `offset` to `end`. Sent once:
        after a lost answer the caller asks `upload_status` where to carry on."""
        source = Path(path)
        headers = {
            "Upload-Draft-Interop-Version": DRAFT_INTEROP_VERSION,
            "Content-Type": PARTIAL_UPLOAD,
            "Upload-Offset": str(offset),
            "Upload-Complete": "?1" if complete else "?0",
            "Content-Length": str(end - offset),
        }

        def build() -> tuple[dict[str, str], _Slice]:
            return headers, _Slice(source, offset, end, progress)

        response = self.transport.request(
            "PATCH", f"/uploads/{upload_id}/", body=build, safety=Safety.UNSAFE
        )
        return _status(upload_id, response, _json_body(response))

    def delete_upload(self, upload_id: str) -> None:
        """`DELETE /api/uploads/{id}/`: cancel it and free its bytes."""
        self.transport.request(
            "DELETE",
            f"/uploads/{upload_id}/",
            headers={"Upload-Draft-Interop-Version": DRAFT_INTEROP_VERSION},
        )

    def upload_resumable(
        self,
        path: Path | str,
        *,
        upload_id: str | None = None,
        chunk: int | None = None,
        progress: ProgressCallback | None = None,
        on_created: Callable[[str], None] | None = None,
    ) -> ResumableStatus:
        """Upload `path` resumably and return the finished upload.

        With `upload_id` (an earlier, interrupted run's), the server is asked where it stands
        and only the bytes after its offset are sent; an upload that expired, or one of
        another length, is replaced by a new one. `on_created` is told a new upload's id
        before any byte is sent, so a caller can keep it to resume after being killed.
        Lost answers, 5xx and offset conflicts carry on from the server's offset; the
        policy's `max_attempts` failures in a row without progress end it.
        """
        source = Path(path)
        size = os.stat(source).st_size
        status: ResumableStatus | None = None
        if upload_id:
            try:
                status = self.upload_status(upload_id)
            except NotFound:
                status = None
            if status is not None and status.length not in (None, size):
                status = None
        if status is None:
            status = self.create_upload(length=size)
            if on_created is not None:
                on_created(status.upload_id)
        resumed_from = status.offset
        step = chunk or chunk_size()
        policy = self.transport.retry
        failures = 0
        while not status.complete:
            end = min(size, status.offset + step)
            try:
                status = self.append_upload(
                    status.upload_id,
                    source,
                    offset=status.offset,
                    end=end,
                    complete=end == size,
                    progress=progress,
                )
                failures = 0
                continue
            except ConflictError as exc:
                expected = exc.body.get("expected-offset", exc.body.get("expected_offset"))
                if isinstance(expected, int) and expected != status.offset:
                    # Stale: carry on from the server's offset at once (no failure).
                    status = ResumableStatus(status.upload_id, expected, size, False)
                    continue
                failure: YoyakuError = exc  # another request is appending: wait, then ask
            except (TransportError, ServerError) as exc:
                failure = exc
            except ApiError as exc:
                if exc.code != "upload_completed":
                    raise
                failure = exc  # completed meanwhile (another uploader): HEAD says so
            failures += 1
            if failures >= policy.max_attempts:
                raise failure
            self.transport.wait_before_retry(
                "PATCH",
                f"/uploads/{status.upload_id}/",
                failures,
                policy.delay(failures),
                str(failure),
            )
            status = self.upload_status(status.upload_id)
        return ResumableStatus(
            upload_id=status.upload_id,
            offset=status.offset,
            length=status.length,
            complete=True,
            resumed_from=resumed_from,
            sha256=status.sha256,
        )

    def attach_upload(self, submission_id: str, upload_id: str, filename: str) -> UploadedFile:
        """`POST /api/submissions/{id}/files/` `{"upload_id", "filename"}`: a finished upload
        becomes a file of the draft (every rule of a file sent whole applies)."""
        response = self.transport.request(
            "POST",
            f"/submissions/{submission_id}/files/",
            json={"upload_id": upload_id, "filename": filename},
            safety=Safety.SAFE,
        )
        return UploadedFile.from_answer(response.json(), status_code=response.status_code)
