from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from apps.core.models import ApiToken, Heartbeat


@admin.register(Heartbeat)
class HeartbeatAdmin(admin.ModelAdmin[Heartbeat]):
    list_display = ("name", "last_tick", "beats")
    readonly_fields = ("name", "last_tick", "beats", "detail")
    search_fields = ("name",)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin[ApiToken]):
    """Names, owners, scopes and dates; never the token (not stored) nor its digest or lookup
    id (not shown). Tokens are made by their owner (`/api/tokens/`, `yoyaku token create`),
    where the secret is shown once; staff may revoke (delete) one here."""

    list_display = ("name", "user", "scopes", "created_at", "expires_at", "last_used_at")
    list_filter = ("created_at", "expires_at")
    search_fields = ("name", "user__username")
    fields = ("name", "user", "scopes", "created_at", "expires_at", "last_used_at")
    readonly_fields = fields
    list_select_related = ("user",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Viewing only: scopes and expiry are the owner's choice at creation.
        return False
