"""Where an action may go: relative paths to the platform, absolute URLs only to allowed hosts.

The one home of the target rules; checked at booking (400 `invalid_schedule`) and again right
before each request, because the allow-list, the URL configuration or DNS may have changed.

- A relative path names an API route of the platform: it starts with a single `/`, holds no
  whitespace, control or format characters, backslash, fragment or dot segment, and Django's
  `resolve()` maps it to a real `/api/` view (not the JSON 404 catch-all). Its URL is built
  from parsed parts (the base URL's scheme and host, the base path + the path, the query), and
  the result must still have the base URL's scheme and host — so no string trick
  (`/ //evil/`, `/\\evil`, `//evil`) can send the platform's own signed call elsewhere.
- An absolute `http(s)` URL needs its host (or `host:port`) in SCHEDULE_WEBHOOK_ALLOWED_HOSTS,
  no userinfo.
"""

from __future__ import annotations

import ipaddress
import socket
import unicodedata
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from django.conf import settings
from django.urls import Resolver404, resolve

# The catch-all under /api/ that answers a JSON 404: resolvable, but not a route.
NOT_A_ROUTE = {"api-not-found"}


class TargetRefused(Exception):
    """The action's URL may not be called; the message says why."""


@dataclass(frozen=True)
class Target:
    url: str
    relative: bool
    scheme: str
    host: str
    port: int


def is_absolute(path: str) -> bool:
    parts = urlsplit(path)
    return bool(parts.scheme or parts.netloc or path.startswith("//"))


def _allowed_entries() -> set[str]:
    return {h.strip().lower() for h in settings.SCHEDULE_WEBHOOK_ALLOWED_HOSTS if h.strip()}


def _host_port(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise TargetRefused("Only http and https URLs are allowed.")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise TargetRefused("URLs with user information are not allowed.")
    host = (parts.hostname or "").lower()
    if not host:
        raise TargetRefused("The URL has no host.")
    try:
        port = parts.port
    except ValueError as exc:
        raise TargetRefused("The URL has an invalid port.") from exc
    return parts.scheme, host, port


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def entry_names(host: str, port: int | None) -> set[str]:
    """The allow-list spellings that name `host` (and `host:port` when a port is given)."""
    shown = f"[{host}]" if ":" in host else host
    names = {host, shown}
    if port is not None:
        names |= {f"{host}:{port}", f"{shown}:{port}"}
    return names


def is_listed(host: str, port: int | None) -> bool:
    """Whether SCHEDULE_WEBHOOK_ALLOWED_HOSTS names `host` (alone, or with this port)."""
    allowed = _allowed_entries()
    return bool(entry_names(host, None) & allowed) or (
        port is not None and bool(entry_names(host, port) & allowed)
    )


def check_allowed(url: str) -> None:
    """Booking-time check of an absolute URL: scheme, no userinfo, host on the allow-list."""
    _, host, port = _host_port(url)
    if not is_listed(host, port):
        raise TargetRefused(f"The host {host!r} is not in SCHEDULE_WEBHOOK_ALLOWED_HOSTS.")


def _is_internal(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return bool(
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_reserved
        or address.is_multicast
        or address.is_unspecified
    )


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def check_resolved(url: str) -> None:
    """Execution-time check: allowed, and every address the name resolves to is public unless
    the allow-list names an address literal. Raises TargetRefused."""
    check_allowed(url)
    _, host, port = _host_port(url)
    if _literal(host) is not None:
        return  # the allow-list names this very address: explicitly allowed
    try:
        infos = socket.getaddrinfo(host, port or 443, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise TargetRefused(f"The host {host!r} does not resolve.") from exc
    for info in infos:
        address = _literal(str(info[4][0]).split("%", 1)[0])
        if address is None or _is_internal(address):
            raise TargetRefused(f"The host {host!r} resolves to an internal address ({address}).")


def _refused_character(path: str) -> str | None:
    for char in path:
        if char.isspace() or char == "\\" or unicodedata.category(char) in {"Cc", "Cf"}:
            return repr(char)
    return None


def check_relative(path: str) -> None:
    """A relative action path must name an API route of the platform. Raises TargetRefused."""
    bad = _refused_character(path)
    if bad is not None:
        raise TargetRefused(
            f"A relative path may not contain whitespace, control characters or '\\' ({bad})."
        )
    if not path.startswith("/") or path.startswith("//"):
        raise TargetRefused("A relative path must start with a single '/'.")
    parts = urlsplit(path)
    if parts.scheme or parts.netloc:
        raise TargetRefused("A relative path may not name a scheme or a host.")
    if "#" in path:
        raise TargetRefused("A relative path may not have a fragment.")
    decoded = unquote(parts.path)
    if {".", ".."} & set(decoded.split("/")):
        raise TargetRefused("A relative path may not contain '.' or '..' segments.")
    if not decoded.startswith("/api/"):
        raise TargetRefused(f"{parts.path!r} is not an API route of the platform (/api/...).")
    try:
        match = resolve(decoded)
    except Resolver404 as exc:
        raise TargetRefused(f"{parts.path!r} is not an API route of the platform.") from exc
    if match.url_name in NOT_A_ROUTE:
        raise TargetRefused(f"{parts.path!r} is not an API route of the platform.")


def relative_url(path: str) -> str:
    """The platform URL of a relative action path, built from parsed parts; raises
    TargetRefused unless the result has exactly the base URL's scheme and host."""
    check_relative(path)
    base = urlsplit(str(settings.SCHEDULE_WEBHOOK_BASE_URL))
    if base.scheme not in ("http", "https") or not base.netloc:
        raise TargetRefused("SCHEDULE_WEBHOOK_BASE_URL must be an http(s) URL.")
    rel = urlsplit(path)
    url: str = urlunsplit(
        (base.scheme, base.netloc, base.path.rstrip("/") + rel.path, rel.query, "")
    )
    joined = urlsplit(url)
    if (joined.scheme, joined.netloc) != (base.scheme, base.netloc):
        raise TargetRefused("A relative path must stay on SCHEDULE_WEBHOOK_BASE_URL's host.")
    return url


def check_action_path(path: str) -> None:
    """Booking-time check of an action's `path`, relative or absolute. Raises TargetRefused."""
    if is_absolute(path):
        check_allowed(path)
    else:
        relative_url(path)


def resolve_target(path: str) -> Target:
    """The URL an action's `path` names, checked again now (raises TargetRefused)."""
    url = path if is_absolute(path) else relative_url(path)
    if is_absolute(path):
        check_resolved(url)
    scheme, host, port = _host_port(url)
    return Target(
        url=url,
        relative=not is_absolute(path),
        scheme=scheme,
        host=host,
        port=port or _default_port(scheme),
    )
