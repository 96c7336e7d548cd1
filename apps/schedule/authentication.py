"""Authenticate the platform's own scheduled calls as the Life's owner.

A request carrying `X-Schedule-Life-UUID` must carry a self-call signature (`selfcalls`: the
derived self-call key over method, path with query, body, Life, plan and attempt) with a
timestamp within five minutes, name a Life whose plan (`X-Schedule-Plan`) is Running right now
with that `webhook-id` and that attempt (`X-Schedule-Attempt`), whose authority is still
live (a birth booked with an API token: that token neither revoked nor expired), and not have
been used before (recorded once in `ConsumedSignature`). Then the request runs as the Life's
owner, with the owner's permissions checked by the view as usual. A receiver's Standard
Webhooks headers, replayed here, are refused: they are signed with another key over other
content.
"""

from __future__ import annotations

from typing import Any

from django.http.request import RawPostDataException
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from apps.schedule.models import Plan, PlanState
from apps.schedule.selectors import BOOKING_TOKEN_GONE, plan_authority_live
from apps.schedule.selfcalls import (
    ATTEMPT_HEADER,
    SelfCall,
    SignatureInvalid,
    SignatureReplayed,
    self_call_verify,
    signature_consume,
)

LIFE_HEADER = "X-Schedule-Life-UUID"


def _self_call(request: Any, life_uuid: str) -> SelfCall:
    """What the request's headers claim, to be checked against its signature. The path is
    Django's (already percent-decoded, as `selfcalls.canonical_target` decodes the sender's)."""
    headers = request.headers
    try:
        timestamp = int(headers.get("webhook-timestamp", ""))
        attempt = int(headers.get(ATTEMPT_HEADER, ""))
    except ValueError as exc:
        raise SignatureInvalid("Missing or malformed webhook timestamp or attempt.") from exc
    query = request.META.get("QUERY_STRING", "")
    return SelfCall(
        msg_id=headers.get("webhook-id", ""),
        timestamp=timestamp,
        method=request.method or "",
        target=request.path + (f"?{query}" if query else ""),
        body=request.body,
        life_uuid=life_uuid,
        plan_kind=headers.get("X-Schedule-Plan", ""),
        attempt=attempt,
    )


class ScheduleWebhookAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        django_request = request._request
        life_uuid = django_request.headers.get(LIFE_HEADER)
        if not life_uuid:
            return None
        try:
            call = _self_call(django_request, life_uuid)
            signature = self_call_verify(
                call=call,
                signatures=django_request.headers.get("webhook-signature", ""),
                now=timezone.now(),
            )
        except (SignatureInvalid, RawPostDataException, OverflowError, OSError, ValueError) as exc:
            raise exceptions.AuthenticationFailed("Invalid schedule webhook signature.") from exc
        plan = (
            Plan.objects.select_related("life__owner")
            .filter(
                life__life_uuid=life_uuid,
                kind=call.plan_kind,
                webhook_id=call.msg_id,
                state=PlanState.RUNNING,
                attempts_count=call.attempt - 1,
            )
            .first()
        )
        if plan is None:
            raise exceptions.AuthenticationFailed("No Life is executing this plan attempt.")
        owner = plan.life.owner
        if not owner.is_active:
            raise exceptions.AuthenticationFailed("The Life's owner is inactive.")
        if not plan_authority_live(plan=plan):
            raise exceptions.AuthenticationFailed(f"Refused: {BOOKING_TOKEN_GONE}.")
        try:
            signature_consume(plan=plan, attempt=call.attempt, signature=signature)
        except SignatureReplayed as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from exc
        return owner, plan

    def authenticate_header(self, request: Request) -> str:
        return "Webhook"


class ScheduleWebhookAuthenticationScheme(OpenApiAuthenticationExtension):
    """Documents the platform's own signed webhook calls in the OpenAPI schema."""

    target_class = "apps.schedule.authentication.ScheduleWebhookAuthentication"
    name = "scheduleWebhook"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "webhook-signature",
            "description": "One-time signature of the platform's own scheduled calls (with "
            "webhook-id, webhook-timestamp, X-Schedule-Life-UUID, X-Schedule-Plan and "
            "X-Schedule-Attempt).",
        }
