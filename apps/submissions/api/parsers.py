"""The multipart parser of the upload endpoints: DRF's, on the streaming upload handler."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import IO, Any

from django.conf import settings
from django.core.exceptions import TooManyFilesSent
from django.http.multipartparser import MultiPartParserError
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, DataAndFiles

from apps.core.exceptions import DomainError
from apps.core.metrics import count_refusals
from apps.core.spooled_multipart import NotAMarker, SpooledParts, spooled_parts
from apps.quotas.services import storage_quota_error
from apps.submissions.exceptions import FileTooLarge, RequestTooLarge, TooManyFiles
from apps.submissions.metrics import UPLOADS
from apps.submissions.selectors import storage_status
from apps.submissions.uploads import CHUNK_SIZE, RawNameMultiPartParser, SubmissionUploadHandler


def _drain(stream: IO[bytes], limit: int) -> None:
    """Read (and drop) up to `limit` bytes of the rest of a refused body, so that the client
    reads our answer instead of a reset connection. Nothing is written anywhere."""
    left = limit
    try:
        while left > 0:
            chunk = stream.read(min(CHUNK_SIZE, left))
            if not chunk:
                return
            left -= len(chunk)
    except OSError:
        pass


@contextlib.contextmanager
def _refusals(handler: SubmissionUploadHandler, drain: Callable[[], None]) -> Iterator[None]:
    """The parser's refusals as the API's errors. On any failure the handler's files are
    discarded, and for a refusal the client is answered for, `drain` reads the rest of the
    body. NotAMarker passes untouched: the caller parses the body as sent."""
    try:
        yield
    except NotAMarker:
        raise
    except DomainError:
        handler.discard()
        drain()
        raise
    except TooManyFilesSent as exc:
        handler.discard()
        drain()
        raise TooManyFiles("Too many files in one request.") from exc
    except MultiPartParserError as exc:
        handler.discard()
        raise ParseError(f"Multipart form parse error - {exc}") from exc
    except BaseException:
        handler.discard()
        raise


def _kept_in_memory() -> int:
    """Bytes besides the files' data a spooled body may keep in memory while parsed: its form
    fields (DATA_UPLOAD_MAX_MEMORY_SIZE) and part heads. A body with more goes through
    Django's parser as sent, which refuses it as before."""
    fields = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return (int(fields) if fields is not None else 10 * 1024 * 1024) + 1024 * 1024


def _request_too_large(limit: int, received: int) -> DomainError:
    return RequestTooLarge(
        f"The request brings at least {received} bytes; one request may carry at most {limit} "
        "bytes of files. Create the submission with the first file and add the others one by "
        "one.",
        extra={"max_request_size": limit},
    )


def _storage_exceeded(used: int, limit: int, received: int) -> DomainError:
    return storage_quota_error(used=used, limit=limit, adding=received)


def _uploader(request: Any) -> Any:
    """Who sends the body, without authenticating from inside the parser.

    DRF's session authentication parses the body itself (its CSRF check reads `POST`) while
    `request.user` is still being decided, so asking DRF for the user here would recurse. The
    DRF user once decided (token clients), else Django's session user (what session
    authentication is deciding on).
    """
    decided = vars(request).get("_user")
    if decided is not None:
        return decided
    return getattr(getattr(request, "_request", None), "user", None)


def _declared_length(meta: Mapping[str, Any]) -> int | None:
    try:
        return int(meta.get("CONTENT_LENGTH") or 0)
    except (TypeError, ValueError):
        return None


class StreamingMultiPartParser(BaseParser):
    """Multipart bodies streamed through `SubmissionUploadHandler`, file names kept raw.

    A refused body is read on (without writing) up to one more `MAX_UPLOAD_FILE_SIZE`, so a
    normal client sees the JSON answer; past that the connection is simply closed.
    """

    media_type = "multipart/form-data"
    #: A single-file endpoint refuses, before reading a byte, a body whose declared length
    #: cannot hold a file within the limit: more than the limit + form fields + 64 KiB.
    single_file = False

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> DataAndFiles[Any, Any]:
        with count_refusals(UPLOADS):
            return self._parse(stream, media_type, dict(parser_context or {}))

    def _parse(
        self, stream: IO[Any], media_type: str | None, context: dict[str, Any]
    ) -> DataAndFiles[Any, Any]:
        request = context["request"]
        meta = request.META.copy()
        meta["CONTENT_TYPE"] = media_type
        if self.single_file:
            self._refuse_oversize_declared_length(meta)
        max_total, over_total = self._byte_budget(request, _declared_length(meta))
        # The view says which extensions its files may have (`upload_file_types`); None
        # leaves them to the service.
        file_types = getattr(context.get("view"), "upload_file_types", ())
        handler = SubmissionUploadHandler(
            request, max_total=max_total, over_total=over_total, file_types=file_types
        )
        drain_limit = int(settings.MAX_UPLOAD_FILE_SIZE) + CHUNK_SIZE
        encoding = str(context.get("encoding") or settings.DEFAULT_CHARSET)
        spooled = spooled_parts(meta)
        if spooled is not None:
            try:
                return self._parse_spooled(spooled, meta, handler, encoding)
            except NotAMarker:
                handler.discard()  # parsed as sent below, with a handler of its own
                handler = SubmissionUploadHandler(
                    request, max_total=max_total, over_total=over_total, file_types=file_types
                )
            finally:
                spooled.close()
        with _refusals(handler, drain=partial(_drain, stream, drain_limit)):
            parser = RawNameMultiPartParser(
                meta,
                stream,  # type: ignore[arg-type]
                [handler],
                encoding,
            )
            data, files = parser.parse()
        return DataAndFiles(data, files)

    def _parse_spooled(
        self,
        spooled: SpooledParts,
        meta: dict[str, Any],
        handler: SubmissionUploadHandler,
        encoding: str,
    ) -> DataAndFiles[Any, Any]:
        """The body from its spool: Django parses the skeleton, the handler takes each file's
        bytes from the spool (apps/core/spooled_multipart.py). The body is read already, so a
        refusal drains nothing. NotAMarker: the caller parses the body as sent."""
        skeleton = spooled.skeleton(_kept_in_memory())
        if skeleton is None:
            raise NotAMarker
        handler.spooled = spooled
        try:
            with _refusals(handler, drain=lambda: None):
                parser = RawNameMultiPartParser(
                    {**meta, "CONTENT_LENGTH": str(len(skeleton))},
                    io.BytesIO(skeleton),
                    [handler],
                    encoding,
                )
                data, files = parser.parse()
        finally:
            handler.spooled = None
        return DataAndFiles(data, files)

    def _byte_budget(
        self, request: Any, declared: int | None
    ) -> tuple[int | None, Callable[[int], DomainError] | None]:
        """The most file bytes this request may bring, and the error for passing it.

        Two bounds: the create request's `MAX_SUBMISSION_REQUEST_SIZE` (a single-file request
        is bounded by `MAX_UPLOAD_FILE_SIZE` already) and the user's remaining storage
        (`QUOTA_MAX_STORAGE_BYTES` minus what they store). A declared Content-Length that
        cannot fit is refused before a byte of the body is read; otherwise the upload handler
        cuts the stream off the moment the files pass the tighter bound. The storage figure
        is read without a lock: the service decides again under the user's quota lock.
        """
        budgets: list[tuple[int, Callable[[int], DomainError]]] = []
        if not self.single_file:
            limit = int(settings.MAX_SUBMISSION_REQUEST_SIZE)
            budgets.append((limit, partial(_request_too_large, limit)))
        user = _uploader(request)
        if user is not None and user.is_authenticated:
            storage = storage_status(user=user)
            budgets.append(
                (storage.remaining, partial(_storage_exceeded, storage.used, storage.limit))
            )
        fields = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if declared is not None and fields is not None:
            # The body also holds form fields (at most DATA_UPLOAD_MAX_MEMORY_SIZE) and part
            # headers: only a body longer than the budget plus those can be refused unread.
            overhead = int(fields) + 64 * 1024
            for budget, error in budgets:
                if declared > budget + overhead:
                    raise error(declared)
        if not budgets:
            return None, None
        return min(budgets, key=lambda item: item[0])

    def _refuse_oversize_declared_length(self, meta: Mapping[str, Any]) -> None:
        fields = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        declared = _declared_length(meta)
        if fields is None or declared is None:
            return
        limit = int(settings.MAX_UPLOAD_FILE_SIZE)
        if declared > limit + int(fields) + 64 * 1024:
            raise FileTooLarge(
                f"The request body ({declared} bytes) cannot hold a file of at most {limit} "
                "bytes; nothing was read.",
                extra={"max_size": limit},
            )


class SingleFileMultiPartParser(StreamingMultiPartParser):
    single_file = True
