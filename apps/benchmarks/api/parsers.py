"""The bundle upload: a multipart body streamed to a temporary file, hashed on the way and cut
off the moment it passes `MAX_BUNDLE_SIZE`."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from django.core.files.uploadedfile import TemporaryUploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopFutureHandlers
from django.http.multipartparser import MultiPartParser, MultiPartParserError
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, DataAndFiles

from apps.benchmarks.exceptions import InvalidBundle

CHUNK_SIZE = 1024 * 1024


class IncomingBundle(TemporaryUploadedFile):
    """A received bundle on local disk with its size and sha256."""

    def __init__(self, *, content_type: str, charset: str | None) -> None:
        super().__init__("bundle.zip", content_type, 0, charset)
        self.sha256 = ""


def _too_large(limit: int) -> InvalidBundle:
    return InvalidBundle(
        f"The bundle is larger than MAX_BUNDLE_SIZE ({limit} bytes).",
        fields={"bundle": [f"must be at most {limit} bytes"]},
    )


class BundleUploadHandler(FileUploadHandler):
    chunk_size = CHUNK_SIZE

    def __init__(self, request: Any = None) -> None:
        super().__init__(request)
        self.limit = int(settings.MAX_BUNDLE_SIZE)
        self.received: list[IncomingBundle] = []
        self.current: IncomingBundle | None = None
        self._hash: Any = None
        self._size = 0

    def new_file(self, field_name: str, *args: Any, **kwargs: Any) -> None:
        super().new_file(field_name, *args, **kwargs)
        if self.received:
            raise InvalidBundle(
                "Send one bundle.", fields={"bundle": ["send exactly one file, named bundle"]}
            )
        self.current = IncomingBundle(
            content_type=self.content_type or "application/zip", charset=self.charset
        )
        self.received.append(self.current)
        self._hash = hashlib.sha256()
        self._size = 0
        raise StopFutureHandlers

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        assert self.current is not None  # noqa: S101 - new_file always runs first
        self._size += len(raw_data)
        if self._size > self.limit:
            raise _too_large(self.limit)
        self._hash.update(raw_data)
        self.current.write(raw_data)
        return None

    def file_complete(self, file_size: int) -> IncomingBundle | None:
        if self.current is None:
            return None
        incoming, self.current = self.current, None
        incoming.seek(0)
        incoming.size = self._size
        incoming.sha256 = self._hash.hexdigest()
        return incoming

    def discard(self) -> None:
        for incoming in self.received:
            incoming.close()
        self.received.clear()


class BundleMultiPartParser(BaseParser):
    media_type = "multipart/form-data"

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
        try:
            declared = int(meta.get("CONTENT_LENGTH") or 0)
        except (TypeError, ValueError):
            declared = 0
        limit = int(settings.MAX_BUNDLE_SIZE)
        if declared > limit + int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0) + 64 * 1024:
            raise _too_large(limit)
        handler = BundleUploadHandler(request)
        try:
            parser = MultiPartParser(
                meta,
                stream,  # type: ignore[arg-type]
                [handler],
                str(context.get("encoding") or settings.DEFAULT_CHARSET),
            )
            data, files = parser.parse()
        except MultiPartParserError as exc:
            handler.discard()
            raise ParseError(f"Multipart form parse error - {exc}") from exc
        except BaseException:
            handler.discard()
            raise
        return DataAndFiles(data, files)
