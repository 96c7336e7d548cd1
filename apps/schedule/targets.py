"""Where an action may go: relative paths to the platform, absolute URLs only to allowed hosts.

Checked at booking (400 `invalid_schedule`) and again right before each request, because the
allow-list or DNS may have changed since. An allowed *name* must also resolve to public
addresses only; a private, loopback, link-local or reserved address is accepted only when the
allow-list names that address itself (e.g. `127.0.0.1:8080` for a receiver on loopback).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from django.conf import settings


class TargetRefused(Exception):
    """The action's URL may not be called; the message says why."""


@dataclass(frozen=True)
class Target:
    url: str
    relative: bool


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


def _entry_names(host: str, port: int | None) -> set[str]:
    shown = f"[{host}]" if ":" in host else host
    names = {host, shown}
    if port is not None:
        names |= {f"{host}:{port}", f"{shown}:{port}"}
    return names


def check_allowed(url: str) -> None:
    """Booking-time check of an absolute URL: scheme, no userinfo, host on the allow-list."""
    _, host, port = _host_port(url)
    allowed = _allowed_entries()
    if not (_entry_names(host, None) & allowed) and not (
        port is not None and _entry_names(host, port) & allowed
    ):
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


def resolve_target(path: str) -> Target:
    """The URL an action's `path` names; absolute ones are checked (raises TargetRefused)."""
    if is_absolute(path):
        check_resolved(path)
        return Target(url=path, relative=False)
    base = settings.SCHEDULE_WEBHOOK_BASE_URL.rstrip("/") + "/"
    return Target(url=urljoin(base, path.lstrip("/")), relative=True)
