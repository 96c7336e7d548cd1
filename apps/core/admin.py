from django.contrib import admin

from apps.core.models import Heartbeat


@admin.register(Heartbeat)
class HeartbeatAdmin(admin.ModelAdmin[Heartbeat]):
    list_display = ("name", "last_tick", "beats")
    readonly_fields = ("name", "last_tick", "beats", "detail")
    search_fields = ("name",)
