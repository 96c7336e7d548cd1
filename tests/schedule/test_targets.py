"""Target rules played by an attacker: relative paths that try to leave the platform, names
that resolve (or rebind) to internal addresses. Every receiver is a real HTTP server on
loopback; only the DNS answers of a test-only name are scripted, since no rebinding DNS server
can be put behind the system resolver here."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.schedule.models import Life, LifeState, Plan, PlanKind, PlanState
from tests.factories.schedule import book_point
from tests.schedule.conftest import Receiver, at
from tests.schedule.test_execution import fire

pytestmark = pytest.mark.django_db
URL = "/api/schedules/"


def _point(path: str, method: str = "GET") -> dict[str, Any]:
    return {
        "schedule_type": "point",
        "term": {"birth_time": at(60)},
        "birth": {"path": path, "method": method},
    }


@pytest.mark.parametrize(
    "path",
    [
        "/ //127.0.0.1:9999/",  # urljoin strips the space: a network-path reference
        "/\t//127.0.0.1:9999/",
        "/\n//127.0.0.1:9999/",
        "/api/me/\r\nHost: evil",
        "/api/me/\x7f",
        "/api/me/\u200b",  # zero-width space (a format character)
        "/api/me/\u2028",  # line separator
        "//127.0.0.1:9999/",
        "/\\127.0.0.1:9999/",
        "api/me/",
        "/tasks",  # the seed tutorial's path: not a route of this platform
        "/api/no-such-route/",
        "/api/../admin/",
        "/api/%2e%2e/admin/",
        "/admin/",
        "/api/me/#frag",
    ],
)
def test_a_relative_path_that_is_not_an_api_route_is_refused_at_booking(
    user_client: APIClient, path: str
) -> None:
    response = user_client.post(URL, _point(path), format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.json()
    body = response.json()
    assert body["success"] is False
    assert body["code"] == "invalid_schedule"
    assert "birth_action" in body["fields"]
    assert Life.objects.count() == 0


@pytest.mark.parametrize(
    "path",
    ["/api/me/", "/api/quotas/me/", "/api/jobs/?status=queued", f"/api/jobs/{'0' * 32}/cancel/"],
)
def test_a_relative_path_to_an_api_route_is_accepted(user_client: APIClient, path: str) -> None:
    response = user_client.post(URL, _point(path), format="json")
    assert response.status_code == HTTPStatus.CREATED, response.json()
    assert response.json()["birth_action"]["path"] == path


def test_a_space_smuggled_path_never_reaches_another_host_at_fire_time(
    user: User, receiver: Receiver, settings: Any
) -> None:
    """A Life stored before the rule existed (or written past the booking check) is checked
    again when it fires: nothing is sent to the host the path smuggles in."""
    settings.SCHEDULE_WEBHOOK_ALLOWED_HOSTS = []
    life = book_point(user, url="/api/me/")
    evil = f"/ //{receiver.host}/"
    Plan.objects.filter(life=life).update(action={"path": evil, "method": "GET"})
    Life.objects.filter(pk=life.pk).update(birth_action={"path": evil, "method": "GET"})
    plan = life.plans.get(kind=PlanKind.BIRTH)
    assert fire(plan) == "failed"
    assert receiver.requests == []
    attempt = plan.attempts.get()
    assert attempt.status_code is None
    assert attempt.error.startswith("refused")
    assert attempt.response_excerpt == ""
    life.refresh_from_db()
    assert life.state == LifeState.STILLBIRTH
    plan.refresh_from_db()
    assert plan.state == PlanState.FAILED


@pytest.mark.parametrize(
    "base", ["http://127.0.0.1:8000", "http://127.0.0.1:8000/", "http://127.0.0.1:8000/yoyaku"]
)
def test_a_relative_url_is_built_on_the_base_urls_host(settings: Any, base: str) -> None:
    from apps.schedule.targets import resolve_target

    settings.SCHEDULE_WEBHOOK_BASE_URL = base
    target = resolve_target("/api/jobs/?status=queued")
    prefix = base.rstrip("/")
    assert target.url == f"{prefix}/api/jobs/?status=queued"
    assert (target.relative, target.host, target.port) == (True, "127.0.0.1", 8000)


def test_the_seed_tutorial_path_is_refused_with_a_clear_message() -> None:
    from apps.schedule.targets import TargetRefused, check_action_path

    with pytest.raises(TargetRefused, match="not an API route"):
        check_action_path("/tasks")


# --- DNS rebinding and internal ranges (item 9 of the hardening issue) -------------------------

INTERNAL = [
    "127.0.0.1",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",  # CGNAT
    "100.127.255.254",
    "0.1.2.3",  # "this network"
    "0.0.0.0",  # noqa: S104 - an address under test, nothing binds it
    "255.255.255.255",
    "224.0.0.1",
    "240.0.0.1",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",  # unique-local
    "fd12:3456::1",
    "fec0::1",  # site-local
    "ff02::1",
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:10.0.0.1",
    "::ffff:100.64.0.1",
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b:1::a00:1",  # local-use NAT64 of 10.0.0.1
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
]


@pytest.mark.parametrize("address", INTERNAL)
def test_every_internal_range_is_refused_by_the_address_rule(address: str) -> None:
    import ipaddress

    from apps.schedule.targets import is_internal

    assert is_internal(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "2606:4700::1111", "64:ff9b::808:808", "::ffff:8.8.8.8"]
)
def test_public_addresses_and_their_translated_forms_pass(address: str) -> None:
    import ipaddress

    from apps.schedule.targets import is_internal

    assert not is_internal(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", INTERNAL)
def test_an_allowed_name_resolving_to_an_internal_range_is_never_called(
    user: User,
    receiver: Receiver,
    scripted_dns: Any,
    loopback_only: list[tuple[str, int]],
    settings: Any,
    address: str,
) -> None:
    port = receiver.server.server_address[1]
    settings.SCHEDULE_WEBHOOK_ALLOWED_HOSTS = [f"hooks.example.test:{port}"]
    scripted_dns.answers["hooks.example.test"] = [address]
    life = book_point(user, url=f"http://hooks.example.test:{port}/hook")
    plan = life.plans.get(kind=PlanKind.BIRTH)
    assert fire(plan) == "failed"
    assert receiver.requests == []
    assert loopback_only == []
    attempt = plan.attempts.get()
    assert attempt.status_code is None
    assert "internal address" in attempt.error or "cannot receive" in attempt.error


def test_a_name_that_rebinds_to_loopback_after_the_check_is_not_followed(
    user: User,
    start_receiver: Any,
    scripted_dns: Any,
    loopback_only: list[tuple[str, int]],
    settings: Any,
) -> None:
    """The attacker's name answers a public address to the check and 127.0.0.2 (a service on
    this host) to every later lookup. The request must go to the checked address — refused
    here by the test network, so nothing leaves loopback — and never to 127.0.0.2."""
    internal = start_receiver("127.0.0.2")
    port = internal.server.server_address[1]
    settings.SCHEDULE_WEBHOOK_ALLOWED_HOSTS = [f"rebind.example.test:{port}"]
    scripted_dns.answers["rebind.example.test"] = ["93.184.216.34", "127.0.0.2"]
    life = book_point(user, url=f"http://rebind.example.test:{port}/admin")
    plan = life.plans.get(kind=PlanKind.BIRTH)
    assert fire(plan) == "failed"
    assert internal.requests == []
    assert loopback_only == [("93.184.216.34", port)]
    assert scripted_dns.lookups == ["rebind.example.test"]
    assert plan.attempts.get().status_code == 599


def test_the_request_goes_to_the_checked_address_with_the_names_host_header(
    user: User,
    start_receiver: Any,
    scripted_dns: Any,
    settings: Any,
) -> None:
    """A name whose internal address the allow-list names literally is called at that
    address, even when the next lookup would answer another one; Host is the name."""
    checked = start_receiver("127.0.0.1")
    port = checked.server.server_address[1]
    internal = start_receiver("127.0.0.2", port)
    settings.SCHEDULE_WEBHOOK_ALLOWED_HOSTS = [f"rebind.example.test:{port}", f"127.0.0.1:{port}"]
    scripted_dns.answers["rebind.example.test"] = ["127.0.0.1", "127.0.0.2"]
    life = book_point(user, url=f"http://rebind.example.test:{port}/hook")
    assert fire(life.plans.get(kind=PlanKind.BIRTH)) == "done"
    assert internal.requests == []
    [request] = checked.requests
    assert request.headers["Host"] == f"rebind.example.test:{port}"
    assert request.path == "/hook"


def test_a_listed_unspecified_address_is_still_refused(settings: Any) -> None:
    from apps.schedule.targets import TargetRefused, resolve_target

    settings.SCHEDULE_WEBHOOK_ALLOWED_HOSTS = ["0.0.0.0:8000"]
    with pytest.raises(TargetRefused, match="cannot receive"):
        resolve_target("http://0.0.0.0:8000/hook")
