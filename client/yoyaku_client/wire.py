"""The request and the answer of a direct request (`yoyaku_client.direct`), without httpx.

A command that talks to a plain-HTTP server sends every request on a socket of its own; what
it needs of a request and an answer is small: the request line, the headers, a body, and the
answer's status, headers and bytes. Building them as `httpx.Request` and `httpx.Response` made
every such command import httpx (about a third of the client's start-up: httpx's models pull
in its URL parser, idna, `urllib.request` and `ssl`), so they are built here, the same way
httpx builds them (the same request target, `Host`, `Content-Length` and JSON body), and
httpx is imported only for TLS, a proxy, a caller's own transport, resumable uploads and
downloads, or to raise a transport error (`_httpx.load`).
"""

from __future__ import annotations

import json as jsonlib
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple
from urllib.parse import urlencode

__all__ = ["Headers", "Request", "Response", "Timeout", "WireURL", "api_url"]

#: A base URL the direct path takes: `http://`, a host name or IPv4 address, a port, a path
#: of characters that need no escaping. Anything else (IPv6, a user, escapes) goes to httpx.
_PLAIN = re.compile(r"http://([A-Za-z0-9.-]+)(?::([0-9]{1,5}))?(/[A-Za-z0-9._~!$&'()*+,;=:@/-]*)?")


class Timeout(NamedTuple):
    """Seconds allowed to connect, to read the answer, to write the request, to get a
    connection from httpx's pool (what `httpx.Timeout` holds)."""

    connect: float | None
    read: float | None
    write: float | None
    pool: float | None

    @classmethod
    def of(cls, value: Any) -> Timeout:
        """From seconds, an `httpx.Timeout`, or None (the client's defaults)."""
        if value is None:
            return cls(connect=10.0, read=120.0, write=120.0, pool=60.0)
        if isinstance(value, (int, float)):
            return cls(float(value), float(value), float(value), float(value))
        return cls(value.connect, value.read, value.write, value.pool)


class Headers:
    """Headers in order, looked up by name whatever its case (as `httpx.Headers`)."""

    def __init__(self, items: Sequence[tuple[str, str]] = ()) -> None:
        self._items = list(items)

    def multi_items(self) -> list[tuple[str, str]]:
        return list(self._items)

    def items(self) -> list[tuple[str, str]]:
        return list(self._items)

    def get(self, name: str, default: str | None = None) -> str | None:
        wanted = name.lower()
        values = [v for k, v in self._items if k.lower() == wanted]
        return ", ".join(values) if values else default

    def __getitem__(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(k for k, _ in self._items)

    def pop(self, name: str, default: str | None = None) -> str | None:
        value = self.get(name, default)
        self._items = [(k, v) for k, v in self._items if k.lower() != name.lower()]
        return value


class WireURL(NamedTuple):
    """What a request needs of its URL: the host and port to connect to, the request
    target (`raw_path`: path and query, as bytes) and the `Host` header (`netloc`)."""

    host: str
    port: int | None
    raw_path: bytes

    @property
    def netloc(self) -> str:
        return self.host if self.port in (None, 80) else f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"http://{self.netloc}{self.raw_path.decode('ascii')}"


def api_url(base_url: str) -> WireURL | None:
    """`<base_url>/api/` for the direct path; None when the base URL is one it leaves to
    httpx (see `_PLAIN`)."""
    found = _PLAIN.fullmatch(base_url.rstrip("/"))
    if found is None:
        return None
    host, port, path = found.group(1).lower(), found.group(2), found.group(3) or ""
    if not host or (port is not None and not 0 < int(port) < 65536):
        return None
    raw = _normalize_path(f"{path}/api/")
    return WireURL(host, int(port) if port is not None else None, raw.encode("ascii"))


def _normalize_path(path: str) -> str:
    # What httpx does to a URL's path (RFC 3986 5.2.4): "." and ".." segments dropped.
    components = path.split("/")
    if "." not in components and ".." not in components:
        return path
    output: list[str] = []
    for component in components:
        if component == ".":
            continue
        if component == "..":
            if output and output != [""]:
                output.pop()
        else:
            output.append(component)
    return "/".join(output)


def _query_value(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return "" if value is None else str(value)


class Request:
    """A request as `httpx.Request(method, url, params=, json=, headers=)` builds it."""

    def __init__(
        self,
        method: str,
        api: WireURL,
        target: str,
        *,
        params: Mapping[str, Any] | None,
        json: Any,
        headers: Mapping[str, str],
    ) -> None:
        self.method = method.upper()
        path = _normalize_path(api.raw_path.decode("ascii") + target.lstrip("/"))
        if params:
            pairs = [
                (key, _query_value(item))
                for key, value in params.items()
                for item in (value if isinstance(value, (list, tuple)) else [value])
            ]
            path += "?" + urlencode(pairs)
        self.url = WireURL(api.host, api.port, path.encode("ascii"))
        self.content = b""
        items = [(k, v) for k, v in headers.items()]
        if json is not None:
            self.content = jsonlib.dumps(
                json, ensure_ascii=False, separators=(",", ":"), allow_nan=False
            ).encode("utf-8")
            names = {k.lower() for k, _ in items}
            if "content-length" not in names:
                items.append(("Content-Length", str(len(self.content))))
            if "content-type" not in names:
                items.append(("Content-Type", "application/json"))
        names = {k.lower() for k, _ in items}
        auto = [("Host", self.url.netloc)] if "host" not in names else []
        if not names & {"content-length", "transfer-encoding"} and self.method in (
            "POST",
            "PUT",
            "PATCH",
        ):
            auto.append(("Content-Length", "0"))
        for name, value in items:  # as httpx: a header is ASCII or the request is not built
            name.encode("ascii")
            value.encode("ascii")
        self.headers = Headers(auto + items)

    def read(self) -> bytes:
        return self.content


class Response:
    """An answer read whole: what the SDK reads of an `httpx.Response`."""

    def __init__(
        self, status_code: int, headers: Sequence[tuple[str, str]], content: bytes, request: Any
    ) -> None:
        self.status_code = status_code
        self.headers = Headers(headers)
        self.content = content
        self.request = request
        self.extensions: dict[str, Any] = {}

    def json(self) -> Any:
        return jsonlib.loads(self.content)

    @property
    def text(self) -> str:
        kind = self.headers.get("Content-Type") or ""
        found = re.search(r"charset=[\"']?([\w.-]+)", kind, re.IGNORECASE)
        try:
            return self.content.decode(found.group(1) if found else "utf-8", errors="replace")
        except (LookupError, UnicodeError):  # no such codec, or one that refuses "replace"
            return self.content.decode("utf-8", errors="replace")

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    def read(self) -> bytes:
        return self.content
