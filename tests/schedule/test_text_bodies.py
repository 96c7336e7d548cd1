"""A webhook with a plain-text body verifies with the Standard Webhooks reference verifier as
docs/schedule.md says (`json_parse=False`; its default parses the body as JSON after checking
the signature), and with the recipe the docs give for any language; a changed body fails."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from apps.schedule.execution.claims import plan_claim
from apps.schedule.execution.executor import plan_execute
from apps.schedule.models import PlanKind
from tests.factories.schedule import book_point
from tests.schedule.conftest import Receiver

pytestmark = pytest.mark.django_db
TEXT = "reindex shard 7 — café\n"


def _verify_by_hand(secret: str, body: bytes, headers: dict[str, str]) -> bool:
    """The recipe of docs/schedule.md: HMAC-SHA256 over `id.timestamp.body` with the secret's
    base64-decoded bytes, compared with each `v1,` signature; a timestamp within 5 minutes."""
    if abs(time.time() - int(headers["webhook-timestamp"])) > 300:
        return False
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(
        hmac.compare_digest(expected, sig.split(",", 1)[1])
        for sig in headers["webhook-signature"].split()
        if sig.startswith("v1,")
    )


def _deliver(user: User, receiver: Receiver, body: object) -> tuple[bytes, dict[str, str]]:
    life = book_point(user, url=f"{receiver.url}/hook", body=body)
    plan = life.plans.get(kind=PlanKind.BIRTH)
    armed = [a for a in plan_claim(owner="test", now=plan.due_at) if a.plan_id == plan.pk]
    plan_execute(plan_id=plan.pk, token=armed[0].token)
    (request,) = receiver.requests
    return request.body, {k.lower(): v for k, v in request.headers.items()}


def test_a_text_body_verifies_with_json_parse_off_and_by_hand(
    user: User, receiver: Receiver
) -> None:
    body, headers = _deliver(user, receiver, TEXT)
    assert body == TEXT.encode()
    secret = django_settings.SCHEDULE_WEBHOOK_SECRET
    # The reference verifier's default: the signature matches, then json.loads fails.
    with pytest.raises(json.JSONDecodeError):
        Webhook(secret).verify(body, headers)
    assert Webhook(secret).verify(body, headers, json_parse=False) is None
    assert _verify_by_hand(secret, body, headers)


def test_a_changed_text_body_fails_both_ways(user: User, receiver: Receiver) -> None:
    body, headers = _deliver(user, receiver, TEXT)
    forged = body.replace(b"7", b"8")
    secret = django_settings.SCHEDULE_WEBHOOK_SECRET
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(forged, headers, json_parse=False)
    assert not _verify_by_hand(secret, forged, headers)


def test_a_json_body_verifies_with_the_default(user: User, receiver: Receiver) -> None:
    body, headers = _deliver(user, receiver, {"n": 1})
    assert Webhook(django_settings.SCHEDULE_WEBHOOK_SECRET).verify(body, headers) == {"n": 1}
