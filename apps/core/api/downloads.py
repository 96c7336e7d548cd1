"""A stored file as a download: always an attachment, never rendered by the browser.

The bytes someone uploaded are served as `application/octet-stream` with
`Content-Disposition: attachment` and `X-Content-Type-Options: nosniff`, so an uploaded HTML
or SVG file is saved, never run in the platform's origin (stored XSS). The stored name goes
into the header only through `content_disposition` (RFC 6266 / RFC 8187): an ASCII fallback of
safe characters in `filename="..."` and the exact name percent-encoded in `filename*`, so no
quote, backslash, CR, LF or other byte of a name can end the header or add another.
"""

from __future__ import annotations

import re
import unicodedata
from typing import IO
from urllib.parse import quote

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse

#: What the ASCII fallback keeps; everything else becomes `_`.
_UNSAFE_FALLBACK = re.compile(r"[^A-Za-z0-9._+-]")
STREAM_BLOCK = 64 * 1024

#: The schema of a download: the file's bytes, whatever they are.
DOWNLOAD_RESPONSE = OpenApiResponse(
    OpenApiTypes.BINARY,
    description="The file's bytes as stored (`Content-Type: application/octet-stream`, "
    "`Content-Disposition: attachment` with the name as `filename*`, `X-Content-Type-Options: "
    "nosniff`, `Cache-Control: private, no-store`, `ETag`: the sha256).",
)


def content_disposition(filename: str) -> str:
    """`attachment; filename="<ASCII fallback>"; filename*=UTF-8''<exact name>`."""
    ascii_name = unicodedata.normalize("NFKD", filename).encode("ascii", "ignore").decode()
    fallback = _UNSAFE_FALLBACK.sub("_", ascii_name).strip("_")
    if not fallback.strip("."):
        fallback = "download"
    elif fallback.startswith("."):
        fallback = f"download{fallback}"
    encoded = quote(filename, safe="")
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}"


def attachment_response(stream: IO[bytes], *, filename: str, sha256: str) -> FileResponse:
    """Stream `stream` (closed when the response ends) as an attachment named `filename`."""
    response = FileResponse(stream, content_type="application/octet-stream")
    response.block_size = STREAM_BLOCK
    response["Content-Disposition"] = content_disposition(filename)
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    if re.fullmatch(r"[0-9a-f]{64}", sha256):
        response["ETag"] = f'"{sha256}"'
    return response
