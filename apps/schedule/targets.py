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
  no userinfo; before each request its name is resolved once, every address is checked
  (`is_internal`) and the request connects to the checked address (`checked_address`,
  `transport.PinnedBackend`).
- An action's own header is an HTTP token name with a printable-ASCII value
  (`header_problem`): anything else cannot be sent (the HTTP client raised on a non-ASCII one
  mid-delivery, leaving the plan Running with no attempt), and never a booking header
  (`X-Schedule-Datetime`), which would book the call instead of making it.
"""

from __future__ import annotations

import ipaddress
import re
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


# RFC 9110: a field name is a token; a value is visible ASCII, spaces and tabs (no CR, LF,
# NUL, DEL or non-ASCII, which the HTTP client refuses or could not encode).
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")
#: Header booking's headers (`apps.schedule.api.header.HEADERS`), as a server reads a name
#: (without case, `_` as `-`): a self-call carrying one is booked instead of run, so the death
#: that undoes a grant would book a Life and never undo it.
BOOKING_HEADERS = frozenset({"x-schedule-datetime", "x-xaas-schedule-datetime"})


def header_problem(name: str, value: str) -> str | None:
    """Why an action's header `name: value` cannot be sent, or None when it can."""
    if not _HEADER_NAME.fullmatch(name):
        return (
            f"Header name {name!r} must be an HTTP token (ASCII letters, digits, !#$%&'*+-.^_`|~)."
        )
    if name.lower().replace("_", "-") in BOOKING_HEADERS:
        return f"Header {name} books a request; an action's request runs when it is due."
    if not _HEADER_VALUE.fullmatch(value):
        return f"Header {name} must hold printable ASCII only (no control or non-ASCII characters)."
    return None


@dataclass(frozen=True)
class Target:
    """A checked URL; `address` is the IP the request must connect to (None for the
    platform's own SCHEDULE_WEBHOOK_BASE_URL, connected by name)."""

    url: str
    relative: bool
    scheme: str
    host: str
    port: int
    address: str | None


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


# Refused beyond what `ipaddress` calls private/loopback/link-local/multicast/reserved/
# unspecified/non-global: "this network", CGNAT, the broadcast address, IPv6 unique-local and
# the deprecated site-local range (some of these are not flagged by every Python version).
_INTERNAL_NETWORKS: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = tuple(
    ipaddress.ip_network(net)
    for net in ("0.0.0.0/8", "100.64.0.0/10", "255.255.255.255/32", "fc00::/7", "fec0::/10")
)
# NAT64 prefixes: the packets go to the IPv4 address in the low 32 bits.
_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped, NAT64 or 6to4 IPv6 address carries, if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if any(address in net for net in _NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def is_internal(address: Address) -> bool:
    """Whether `address` is one a webhook may not reach unless the allow-list names it.

    IPv4-mapped (::ffff:0:0/96) and NAT64 (64:ff9b::/96) forms are judged by the IPv4 address
    they carry, since that is where the packets go; a 6to4 address is refused when the IPv4
    address it carries is internal.
    """
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded_ipv4(address)
        if inner is not None:
            if is_internal(inner):
                return True
            if address.sixtofour is None:
                return False
    if any(address in net for net in _INTERNAL_NETWORKS if net.version == address.version):
        return True
    site_local = isinstance(address, ipaddress.IPv6Address) and address.is_site_local
    return bool(
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or site_local
        or not address.is_global
    )


def _never_reachable(address: Address) -> bool:
    """Addresses no webhook can be meant for, even when the allow-list names them."""
    broadcast = address == ipaddress.IPv4Address("255.255.255.255")
    return bool(address.is_unspecified or address.is_multicast or broadcast)


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def checked_address(host: str, port: int) -> str:
    """Resolve `host` once and return the address to connect to; raises TargetRefused.

    Every address the name resolves to is checked; an internal one (`is_internal`) is refused
    unless the allow-list names that address literally (`127.0.0.1:9000` for a local
    receiver). A host that is itself an address literal passed the allow-list already: the
    operator named it. The caller connects to the returned address and to nothing else
    (`transport.PinnedBackend`), so a second resolution can never send the request elsewhere.
    """
    literal = _literal(host)
    if literal is not None:
        if _never_reachable(literal):
            raise TargetRefused(f"The address {literal} cannot receive webhooks.")
        return str(literal)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        raise TargetRefused(f"The host {host!r} does not resolve.") from exc
    addresses: list[Address] = []
    for info in infos:
        address = _literal(str(info[4][0]).split("%", 1)[0])
        if address is None:
            raise TargetRefused(f"The host {host!r} resolves to an unusable address.")
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise TargetRefused(f"The host {host!r} does not resolve.")
    for address in addresses:
        if _never_reachable(address) or (
            is_internal(address) and not is_listed(str(address), port)
        ):
            raise TargetRefused(f"The host {host!r} resolves to an internal address ({address}).")
    return str(addresses[0])


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


def route_name(path: str) -> str | None:
    """The URL name of the platform route a relative action path calls; None for an absolute
    URL. Raises TargetRefused for a relative path that is not an API route."""
    if is_absolute(path):
        return None
    check_relative(path)
    return resolve(unquote(urlsplit(path).path)).url_name


def check_action_path(path: str) -> None:
    """Booking-time check of an action's `path`, relative or absolute. Raises TargetRefused."""
    if is_absolute(path):
        check_allowed(path)
    else:
        relative_url(path)


def resolve_target(path: str) -> Target:
    """The URL an action's `path` names, checked again now, with the address an absolute
    URL's request must connect to (raises TargetRefused)."""
    if not is_absolute(path):
        url = relative_url(path)
        scheme, host, port = _host_port(url)
        port = port or _default_port(scheme)
        return Target(url=url, relative=True, scheme=scheme, host=host, port=port, address=None)
    check_allowed(path)
    scheme, host, port = _host_port(path)
    port = port or _default_port(scheme)
    address = checked_address(host, port)
    return Target(url=path, relative=False, scheme=scheme, host=host, port=port, address=address)
