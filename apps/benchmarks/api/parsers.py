"""The bundle upload: a multipart body streamed to a temporary file, hashed on the way and cut
off the moment it passes `MAX_BUNDLE_SIZE`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from django.core.files.uploadhandler import StopFutureHandlers
from django.http.multipartparser import MultiPartParser, MultiPartParserError
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, DataAndFiles

from apps.benchmarks.exceptions import InvalidBundle
from apps.core.upload_handlers import HashedTemporaryFile, HashingUploadHandler


class IncomingBundle(HashedTemporaryFile):
    """A received bundle on local disk with its size and sha256."""

    def __init__(self, *, content_type: str, charset: str | None) -> None:
        super().__init__("bundle.zip", content_type, 0, charset)


def _too_large(limit: int) -> InvalidBundle:
    return InvalidBundle(
        f"The bundle is larger than MAX_BUNDLE_SIZE ({limit} bytes).",
        fields={"bundle": [f"must be at most {limit} bytes"]},
    )


class BundleUploadHandler(HashingUploadHandler[IncomingBundle]):
    def __init__(self, request: Any = None) -> None:
        super().__init__(request)
        self.limit = int(settings.MAX_BUNDLE_SIZE)

    def new_file(self, field_name: str, *args: Any, **kwargs: Any) -> None:
        super().new_file(field_name, *args, **kwargs)
        if self.received:
            raise InvalidBundle(
                "Send one bundle.", fields={"bundle": ["send exactly one file, named bundle"]}
            )
        content_type = self.content_type or "application/zip"
        self._start(IncomingBundle(content_type=content_type, charset=self.charset))
        raise StopFutureHandlers

    def _check_size(self, received: int) -> None:
        if self._size > self.limit:
            raise _too_large(self.limit)


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
