"""What the server decides from a request head alone, before a byte of the body is read.

- The request target: an absolute-form target (`GET http://host/a HTTP/1.1`) becomes its path,
  as gunicorn's sync worker gave it; an HTTP/1.1 request without exactly one `Host` is refused
  (RFC 9112 §3.2), as is an expectation other than `100-continue` (RFC 9110 §10.1.1).
- The body limit: `MAX_REQUEST_BODY_SIZE` only for a `POST` or `PATCH` to an upload route (named by
  `UPLOAD_URL_NAMES`) that presents a credential; `MAX_REQUEST_BODY_SIZE_DEFAULT` everywhere
  else. Credentials are only seen, never checked here (checking one takes the database): an
  upload route refuses a body over the default limit with 401 when none is presented, and the
  spool budget bounds what a made-up one can cost.
"""

from __future__ import annotations

from collections.abc import Collection
from http import HTTPStatus
from urllib.parse import unquote_to_bytes, urlsplit

from django.http.cookie import parse_cookie
from django.urls import Resolver404, resolve

from config.server.body import BodyLimits, Refusal, Scope, too_large

#: Authorization schemes the API accepts for an upload (apps/core/authentication.py).
TOKEN_SCHEMES = (b"bearer", b"token")


def head_refusal(scope: Scope) -> Refusal | None:
    """Why the head alone is refused, or None."""
    hosts = 0
    for name, value in scope["headers"]:
        if name == b"expect" and value.strip().lower() != b"100-continue":
            # What gunicorn's sync worker answers too.
            return Refusal(HTTPStatus.EXPECTATION_FAILED, "Unsupported expectation.")
        hosts += name == b"host"
    if scope["http_version"] == "1.1" and hosts != 1:
        return Refusal(
            HTTPStatus.BAD_REQUEST, "An HTTP/1.1 request must carry exactly one Host header."
        )
    return None


def to_origin_form(scope: Scope) -> None:
    """An absolute-form target's path (and only its path) becomes the request's path."""
    raw: bytes = scope.get("raw_path") or scope["path"].encode()
    if raw.startswith(b"/") or b"://" not in raw:
        return
    path = urlsplit(raw.decode("latin-1")).path.encode("latin-1") or b"/"
    scope["raw_path"] = path
    scope["path"] = unquote_to_bytes(path).decode("utf-8", errors="replace")


def presents_credential(scope: Scope, session_cookie: str) -> bool:
    """A token (`Authorization: Bearer …`) or a session cookie, valid or not."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            parts = value.split()
            if len(parts) == 2 and parts[0].lower() in TOKEN_SCHEMES:
                return True
        elif name == b"cookie" and parse_cookie(value.decode("latin-1")).get(session_cookie):
            return True
    return False


class BodyRoutes:
    """Which requests may bring the large body: a `POST` (or, for a resumable upload's
    append, a `PATCH`) to a URL named in `upload_names`."""

    def __init__(self, upload_names: Collection[str], session_cookie: str) -> None:
        self.upload_names = frozenset(upload_names)
        self.session_cookie = session_cookie

    def is_upload(self, scope: Scope) -> bool:
        if scope["method"] not in ("POST", "PATCH"):
            return False
        try:
            match = resolve(scope["path"])
        except Resolver404:
            return False
        return match.view_name in self.upload_names

    def body_limit(self, scope: Scope, limits: BodyLimits) -> tuple[int, Refusal]:
        """The most bytes the request's body may carry, and the answer past them."""
        if not self.is_upload(scope):
            return limits.default_size, too_large(limits.default_size)
        if presents_credential(scope, self.session_cookie):
            return limits.max_size, too_large(limits.max_size)
        return limits.default_size, Refusal(
            HTTPStatus.UNAUTHORIZED,
            "Authentication credentials were not provided: without them a request body may "
            f"carry at most {limits.default_size} bytes.",
            {"max_request_size": limits.default_size},
            headers=((b"WWW-Authenticate", b"Bearer"),),
        )
