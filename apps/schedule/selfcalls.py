"""Webhook signatures: Standard Webhooks for receivers, a bound one-time signature for the
platform's own calls (SPEC §10).

Two keys come from SCHEDULE_WEBHOOK_SECRET:

- external receivers get Standard Webhooks signatures made with the secret itself (id,
  timestamp, body), so any `standardwebhooks` receiver holding SCHEDULE_WEBHOOK_SECRET
  verifies them, as before;
- the platform's own calls (relative action paths) are signed with a key derived for them
  alone, HMAC-SHA256(secret, SELF_CALL_LABEL), over the method, the path with its query, the
  body's SHA-256, the Life, the plan and the attempt. A receiver's headers are therefore no
  credential: their signature is made with the other key over other content, and a self-call
  signature is valid only for its own request. Standard Webhooks signs `{id}.{ts}.{body}`
  with ids the platform makes (`msg_<hex>`), so no external signature can equal the label's
  HMAC.

Each self-call signature is accepted once: the authenticator records it in
`ConsumedSignature` (unique digest) before the request runs, so a replay — even a concurrent
one — gets 401. Rows older than twice the timestamp tolerance can no longer match a fresh
request and are deleted by the `schedule` cleanup.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

import httpx
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.encoding import repercent_broken_unicode
from standardwebhooks.webhooks import Webhook

from apps.schedule.models import ConsumedSignature, Plan

SELF_CALL_LABEL = b"yoyaku/schedule/self-call-signing-key/v1"
SELF_CALL_VERSION = "v1"
TOLERANCE = dt.timedelta(minutes=5)
ATTEMPT_HEADER = "X-Schedule-Attempt"


class SignatureInvalid(Exception):
    """The self-call's signature, timestamp or attempt does not verify."""


class SignatureReplayed(Exception):
    """This self-call signature was accepted before."""


def _secret() -> bytes:
    """The raw key of SCHEDULE_WEBHOOK_SECRET, decoded as Standard Webhooks does."""
    secret = str(settings.SCHEDULE_WEBHOOK_SECRET)
    if secret.startswith("whsec_"):
        secret = secret[len("whsec_") :]
    return base64.b64decode(secret)


def self_call_key() -> bytes:
    return hmac.new(_secret(), SELF_CALL_LABEL, hashlib.sha256).digest()


def external_signature(*, msg_id: str, timestamp: dt.datetime, body: str) -> str:
    """The Standard Webhooks `webhook-signature` of a call to an external receiver."""
    return str(Webhook(settings.SCHEDULE_WEBHOOK_SECRET).sign(msg_id, timestamp, body))


def canonical_target(raw_path: str) -> str:
    """A request's path with its query as Django will see it: the path percent-decoded the
    way Django decodes PATH_INFO, the query as sent."""
    path, _, query = raw_path.partition("?")
    decoded = repercent_broken_unicode(unquote_to_bytes(path)).decode()
    return f"{decoded}?{query}" if query else decoded


def url_target(url: str) -> str:
    """`canonical_target` of the request httpx/httpcore will send for `url`."""
    return canonical_target(httpx.URL(url).raw_path.decode("ascii"))


@dataclass(frozen=True)
class SelfCall:
    """Everything a self-call signature covers."""

    msg_id: str
    timestamp: int
    method: str
    target: str  # path with query, see `canonical_target`
    body: bytes
    life_uuid: str
    plan_kind: str
    attempt: int

    def canonical(self) -> bytes:
        fields = [
            "yoyaku-self-call",
            self.msg_id,
            self.timestamp,
            self.method.upper(),
            self.target,
            hashlib.sha256(self.body).hexdigest(),
            self.life_uuid,
            self.plan_kind,
            self.attempt,
        ]
        return json.dumps(fields, separators=(",", ":"), ensure_ascii=True).encode()

    def signature(self) -> str:
        digest = hmac.new(self_call_key(), self.canonical(), hashlib.sha256).digest()
        return f"{SELF_CALL_VERSION},{base64.b64encode(digest).decode()}"


def self_call_headers(call: SelfCall) -> list[tuple[str, str]]:
    """The headers that authenticate `call` at the platform."""
    return [
        ("webhook-id", call.msg_id),
        ("webhook-timestamp", str(call.timestamp)),
        ("webhook-signature", call.signature()),
        ("X-Schedule-Life-UUID", call.life_uuid),
        ("X-Schedule-Plan", call.plan_kind),
        (ATTEMPT_HEADER, str(call.attempt)),
    ]


def self_call_verify(*, call: SelfCall, signatures: str, now: dt.datetime) -> str:
    """Check the timestamp (within TOLERANCE of `now`) and that one of the space-separated
    `signatures` is `call`'s. Returns the matching signature; raises SignatureInvalid."""
    sent = dt.datetime.fromtimestamp(call.timestamp, tz=dt.UTC)
    if abs(now - sent) > TOLERANCE:
        raise SignatureInvalid("The webhook timestamp is too old or too new.")
    expected = call.signature()
    for candidate in signatures.split():
        if hmac.compare_digest(candidate.encode(), expected.encode()):
            return expected
    raise SignatureInvalid("Invalid schedule webhook signature.")


def signature_consume(*, plan: Plan, attempt: int, signature: str) -> None:
    """Record that `signature` was used; raises SignatureReplayed if it was before.

    A unique row per signature, inserted in a narrow atomic block: of any number of
    concurrent requests carrying one signature exactly one inserts it (the database decides,
    on PostgreSQL and SQLite alike) and the others get SignatureReplayed.
    """
    digest = hashlib.sha256(signature.encode()).hexdigest()
    try:
        with transaction.atomic():
            ConsumedSignature.objects.create(plan=plan, attempt=attempt, digest=digest)
    except IntegrityError as exc:
        raise SignatureReplayed("This schedule webhook signature was already used.") from exc


def consumed_signatures_purge(*, now: dt.datetime, dry_run: bool = False) -> int:
    """Delete used signatures too old to match any fresh request (older than twice the
    timestamp tolerance); returns how many."""
    old = ConsumedSignature.objects.filter(created_at__lt=now - 2 * TOLERANCE)
    if dry_run:
        return old.count()
    deleted, _ = old.delete()
    return deleted
