"""Authenticate the platform's own scheduled calls as the Life's owner.

A request carrying `X-Schedule-Life-UUID` must have a valid Standard Webhooks signature (HMAC
with SCHEDULE_WEBHOOK_SECRET over the body), a timestamp within five minutes, and name a Life
whose plan (`X-Schedule-Plan`) is Running right now with that `webhook-id`. Then the request
runs as the Life's owner, with the owner's permissions checked by the view as usual.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from apps.schedule.models import Plan, PlanState

LIFE_HEADER = "X-Schedule-Life-UUID"


class ScheduleWebhookAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        django_request = request._request
        life_uuid = django_request.headers.get(LIFE_HEADER)
        if not life_uuid:
            return None
        headers = {
            name: django_request.headers.get(name, "")
            for name in ("webhook-id", "webhook-timestamp", "webhook-signature")
        }
        try:
            body = django_request.body.decode("utf-8")
            Webhook(settings.SCHEDULE_WEBHOOK_SECRET).verify(body, headers, json_parse=False)
        except (WebhookVerificationError, UnicodeDecodeError, ValueError) as exc:
            raise exceptions.AuthenticationFailed("Invalid schedule webhook signature.") from exc
        plan = (
            Plan.objects.select_related("life__owner")
            .filter(
                life__life_uuid=life_uuid,
                kind=django_request.headers.get("X-Schedule-Plan", ""),
                webhook_id=headers["webhook-id"],
                state=PlanState.RUNNING,
            )
            .first()
        )
        if plan is None:
            raise exceptions.AuthenticationFailed("No Life is executing this plan.")
        owner = plan.life.owner
        if not owner.is_active:
            raise exceptions.AuthenticationFailed("The Life's owner is inactive.")
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
            "description": "Standard Webhooks signature of the platform's own scheduled calls "
            "(with webhook-id, webhook-timestamp and X-Schedule-Life-UUID).",
        }
