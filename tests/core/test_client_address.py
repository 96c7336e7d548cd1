"""The client address the product keys on: the socket's, or the one TRUSTED_PROXY_COUNT proxies
vouch for in X-Forwarded-For. The attacker writes whatever X-Forwarded-For they like; only the
entries the trusted proxies appended are read."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from django.core.cache import cache
from django.test import RequestFactory
from rest_framework.test import APIClient

from apps.core.client_address import client_ip, forwarded_client, normalize_ip

PROXY = "10.0.0.2"


def _ip(remote: str, forwarded: str | None = None) -> str:
    extra: dict[str, Any] = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded is not None else {}
    return client_ip(RequestFactory().get("/", REMOTE_ADDR=remote, **extra))


def test_by_default_a_forged_forwarded_for_is_ignored(settings: Any) -> None:
    assert settings.TRUSTED_PROXY_COUNT == 0
    assert _ip("198.51.100.66", "203.0.113.7") == "198.51.100.66"
    assert _ip("198.51.100.66", "203.0.113.7, 192.0.2.1") == "198.51.100.66"


def test_one_proxy_reads_only_the_entry_it_appended(settings: Any) -> None:
    settings.TRUSTED_PROXY_COUNT = 1
    # The attacker wrote "203.0.113.7"; the proxy appended the address it saw.
    assert _ip(PROXY, "203.0.113.7, 198.51.100.66") == "198.51.100.66"
    assert _ip(PROXY, "198.51.100.66") == "198.51.100.66"


def test_two_proxies_read_the_entry_two_from_the_right(settings: Any) -> None:
    settings.TRUSTED_PROXY_COUNT = 2
    # client -> CDN (appends the client) -> nginx (appends the CDN) -> app
    assert _ip(PROXY, "203.0.113.7, 198.51.100.66, 192.0.2.10") == "198.51.100.66"


@pytest.mark.parametrize(
    "forwarded",
    [
        "",  # an empty header
        " , ",  # only separators
        "unknown",  # not an address (RFC 7239 obfuscated identifiers and the like)
        "198.51.100.66<script>",
        "999.1.1.1",
        "203.0.113.7 198.51.100.66",  # no comma: one entry, not an address
    ],
)
def test_a_malformed_entry_falls_back_to_the_socket_address(settings: Any, forwarded: str) -> None:
    settings.TRUSTED_PROXY_COUNT = 1
    assert _ip(PROXY, forwarded) == PROXY


def test_fewer_entries_than_proxies_fall_back_to_the_socket_address(settings: Any) -> None:
    # Two proxies promised, one entry: the client cannot pick its address by sending less.
    settings.TRUSTED_PROXY_COUNT = 2
    assert _ip(PROXY, "203.0.113.7") == PROXY
    assert _ip(PROXY) == PROXY


def test_addresses_are_compared_in_one_spelling() -> None:
    assert normalize_ip("::ffff:198.51.100.66") == "198.51.100.66"
    assert normalize_ip("2001:DB8:0:0::1") == "2001:db8::1"
    assert normalize_ip("[2001:db8::1]:443") == "2001:db8::1"
    assert normalize_ip("198.51.100.66:5555") == "198.51.100.66"
    assert normalize_ip("gpu-2") is None
    assert forwarded_client("203.0.113.7, 198.51.100.66", 0) is None


@pytest.mark.django_db
@pytest.mark.urls("tests.core.urls")
def test_a_forged_forwarded_for_does_not_escape_an_api_throttle(settings: Any) -> None:
    """DRF's throttles count per client address too (`NUM_PROXIES` follows
    TRUSTED_PROXY_COUNT, 0 by default): a new forged X-Forwarded-For per request is the same
    client."""
    assert settings.REST_FRAMEWORK["NUM_PROXIES"] == settings.TRUSTED_PROXY_COUNT == 0
    cache.clear()
    client = APIClient(REMOTE_ADDR="198.51.100.66")
    first = client.get("/api/test/throttled/", HTTP_X_FORWARDED_FOR="203.0.113.1")
    assert first.status_code == HTTPStatus.OK
    second = client.get("/api/test/throttled/", HTTP_X_FORWARDED_FOR="203.0.113.2")
    assert second.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert second.json()["code"] == "rate_limited"
    # Another client is counted on its own.
    other = APIClient(REMOTE_ADDR="203.0.113.7").get("/api/test/throttled/")
    assert other.status_code == HTTPStatus.OK


@pytest.mark.django_db
@pytest.mark.urls("tests.core.urls")
def test_behind_one_proxy_the_throttle_counts_the_address_the_proxy_saw(settings: Any) -> None:
    settings.TRUSTED_PROXY_COUNT = 1
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    cache.clear()
    client = APIClient(REMOTE_ADDR=PROXY)
    # The attacker varies the part it writes; the proxy's entry stays its real address.
    ok = client.get("/api/test/throttled/", HTTP_X_FORWARDED_FOR="203.0.113.1, 198.51.100.66")
    assert ok.status_code == HTTPStatus.OK
    again = client.get("/api/test/throttled/", HTTP_X_FORWARDED_FOR="203.0.113.2, 198.51.100.66")
    assert again.status_code == HTTPStatus.TOO_MANY_REQUESTS
    # Everyone shares the proxy's socket address, yet another client is not throttled.
    other = client.get("/api/test/throttled/", HTTP_X_FORWARDED_FOR="203.0.113.7")
    assert other.status_code == HTTPStatus.OK
