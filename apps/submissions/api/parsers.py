"""The multipart parser of the upload endpoints: DRF's, on the streaming upload handler."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from django.core.exceptions import TooManyFilesSent
from django.http.multipartparser import MultiPartParserError
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, DataAndFiles

from apps.core.exceptions import DomainError
from apps.submissions.exceptions import FileTooLarge, TooManyFiles
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
        context = dict(parser_context or {})
        request = context["request"]
        meta = request.META.copy()
        meta["CONTENT_TYPE"] = media_type
        handler = SubmissionUploadHandler(request)
        if self.single_file:
            self._refuse_oversize_declared_length(meta)
        drain_limit = int(settings.MAX_UPLOAD_FILE_SIZE) + CHUNK_SIZE
        try:
            parser = RawNameMultiPartParser(
                meta,
                stream,  # type: ignore[arg-type]
                [handler],
                str(context.get("encoding") or settings.DEFAULT_CHARSET),
            )
            data, files = parser.parse()
        except DomainError:
            handler.discard()
            _drain(stream, drain_limit)
            raise
        except TooManyFilesSent as exc:
            handler.discard()
            _drain(stream, drain_limit)
            raise TooManyFiles("Too many files in one request.") from exc
        except MultiPartParserError as exc:
            handler.discard()
            raise ParseError(f"Multipart form parse error - {exc}") from exc
        except BaseException:
            handler.discard()
            raise
        return DataAndFiles(data, files)

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
