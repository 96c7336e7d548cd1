"""The client's address: the socket's, or the one `TRUSTED_PROXY_COUNT` proxies vouch for.

Each proxy in front of the web process appends the address it received the request from to
`X-Forwarded-For`; whatever the client wrote itself stays on the left. With N trusted proxies
the rightmost N entries were written by them, and the entry N from the right is the address
the outermost proxy saw: the client. Anything further left is the client's own text and is
never read.

Fallback (docs/decisions.md): with no trusted proxies, a missing header, fewer than N entries
or an entry N from the right that is not an IP address, the answer is the socket address
(`REMOTE_ADDR`). A correctly configured chain never falls back, and a client cannot choose the
address it falls back to, so a malformed header can neither pick someone else's address nor
escape into a fresh one.

Every part of the product that keys on or records a client address reads it here: the login
lock-out (django-axes' `AXES_CLIENT_IP_CALLABLE`), the web server's per-client share of the
spool budget (`address_of`, config/server/bridge.py); DRF's throttles follow the same count
(`NUM_PROXIES`).
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest

FORWARDED_FOR = "HTTP_X_FORWARDED_FOR"


def normalize_ip(text: str) -> str | None:
    """`text` as a canonical IP address (IPv4-mapped IPv6 as IPv4; a `host:port` or
    `[v6]:port` form without its port), or None when it is not one."""
    candidate = text.strip()
    if candidate.startswith("[") and "]" in candidate:
        candidate = candidate[1 : candidate.index("]")]
    elif candidate.count(":") == 1:
        candidate = candidate.partition(":")[0]
    try:
        address = ipaddress.ip_address(candidate)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def forwarded_client(forwarded_for: str, proxies: int) -> str | None:
    """The entry `proxies` from the right of an `X-Forwarded-For` value, as an IP address;
    None when there are fewer entries or it is not an address."""
    if proxies <= 0:
        return None
    entries = forwarded_for.split(",")
    if len(entries) < proxies:
        return None
    return normalize_ip(entries[-proxies])


def address_of(socket_address: str, forwarded: str | None, proxies: int) -> str:
    """The client's address from the socket's and the `X-Forwarded-For` value (see the
    module); no settings read, so the web server's spool budget keys on the same answer."""
    if proxies > 0 and forwarded is not None:
        vouched = forwarded_client(forwarded, proxies)
        if vouched is not None:
            return vouched
    return normalize_ip(socket_address) or socket_address


def client_ip(request: HttpRequest) -> str:
    """The client's address for `request` under `TRUSTED_PROXY_COUNT` (see the module)."""
    socket_address = str(request.META.get("REMOTE_ADDR") or "")
    forwarded = request.META.get(FORWARDED_FOR)
    return address_of(
        socket_address,
        forwarded if isinstance(forwarded, str) else None,
        int(settings.TRUSTED_PROXY_COUNT),
    )
