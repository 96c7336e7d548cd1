from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from apps.core.exceptions import DomainError
from apps.jobs.models import IdempotencyKey, Job
from apps.jobs.services import job_cancel


@admin.register(Job)
class JobAdmin(admin.ModelAdmin[Job]):
    list_display = ("id", "owner", "submission", "status", "resource_class", "cost", "created_at")
    list_filter = ("status", "resource_class", "created_at")
    list_select_related = ("owner", "submission")
    search_fields = ("id", "owner__username", "submission__id")
    readonly_fields = (
        "id",
        "owner",
        "submission",
        "status",
        "config",
        "resource_class",
        "cost",
        "logs",
        "error",
        "created_at",
        "started_at",
        "finished_at",
    )
    actions = ("cancel_jobs",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(
        description="Cancel the selected jobs (frees their slots)", permissions=("change",)
    )
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        cancelled = 0
        for job_id in queryset.values_list("id", flat=True):
            try:
                job_cancel(job_id=job_id)
            except DomainError as exc:
                self.message_user(request, f"{job_id}: {exc.message}", messages.WARNING)
            else:
                cancelled += 1
        self.message_user(request, f"Cancelled {cancelled} job(s).", messages.SUCCESS)


class KeyStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: object) -> list[tuple[str, str]]:
        return [
            ("claimed", "claimed (in progress)"),
            ("bound", "bound to a job"),
            ("expired", "expired"),
        ]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[IdempotencyKey]
    ) -> QuerySet[IdempotencyKey]:
        now = timezone.now()
        if self.value() == "claimed":
            return queryset.filter(job__isnull=True, expires_at__gt=now)
        if self.value() == "bound":
            return queryset.filter(job__isnull=False, expires_at__gt=now)
        if self.value() == "expired":
            return queryset.filter(expires_at__lte=now)
        return queryset


@admin.register(IdempotencyKey)
class IdempotencyKeyAdmin(admin.ModelAdmin[IdempotencyKey]):
    list_display = ("key", "user", "job", "state", "created_at", "expires_at")
    list_filter = (KeyStateFilter, "created_at")
    list_select_related = ("user", "job")
    search_fields = ("key", "user__username", "job__id")
    readonly_fields = (
        "key",
        "user",
        "job",
        "state",
        "fingerprint",
        "lock_token",
        "locked_at",
        "created_at",
        "expires_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="state (now)")
    def state(self, key: IdempotencyKey) -> str:
        if key.expires_at <= timezone.now():
            return "expired"
        return "claimed (in progress)" if key.job_id is None else "bound"
