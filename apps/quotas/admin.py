from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from apps.core.exceptions import DomainError
from apps.quotas.models import QuotaPolicy, Reservation, ReservationState
from apps.quotas.selectors import quota_limits, reservation_state_annotation
from apps.quotas.services import reservation_release


@admin.register(QuotaPolicy)
class QuotaPolicyAdmin(admin.ModelAdmin[QuotaPolicy]):
    list_display = (
        "user",
        "max_concurrent_jobs",
        "concurrent_boost",
        "effective_concurrent_limit",
        "max_jobs_per_day",
        "monthly_cost_limit",
        "max_storage_bytes",
        "updated_at",
    )
    list_filter = ("updated_at",)
    list_select_related = ("user",)
    search_fields = ("user__username", "user__email")
    readonly_fields = ("effective_concurrent_limit", "updated_at")
    autocomplete_fields = ("user",)

    @admin.display(description="effective concurrent limit")
    def effective_concurrent_limit(self, policy: QuotaPolicy) -> int:
        return quota_limits(policy=policy).max_concurrent_jobs


class ReservationStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(value), str(label)) for value, label in ReservationState.choices]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[Reservation]
    ) -> QuerySet[Reservation]:
        if not self.value():
            return queryset
        return queryset.annotate(
            computed_state=reservation_state_annotation(timezone.now())
        ).filter(computed_state=self.value())


@admin.register(Reservation)
class ReservationAdmin(admin.ModelAdmin[Reservation]):
    list_display = ("id", "user", "state", "created_at", "expires_at", "job_id")
    list_filter = (ReservationStateFilter, "created_at")
    list_select_related = ("user",)
    search_fields = ("id", "user__username", "job_id")
    readonly_fields = (
        "id",
        "user",
        "state",
        "created_at",
        "expires_at",
        "consumed_at",
        "released_at",
        "job_id",
    )
    actions = ("release_reservations",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="state (now)")
    def state(self, reservation: Reservation) -> str:
        return str(reservation.state_at(timezone.now()))

    @admin.action(
        description="Release the selected reservations (frees their slots)",
        permissions=("change",),
    )
    def release_reservations(self, request: HttpRequest, queryset: QuerySet[Reservation]) -> None:
        released = 0
        for reservation_id in queryset.values_list("id", flat=True):
            try:
                reservation_release(reservation_id=reservation_id)
            except DomainError as exc:
                self.message_user(request, f"{reservation_id}: {exc.message}", messages.WARNING)
            else:
                released += 1
        self.message_user(request, f"Released {released} reservation(s).", messages.SUCCESS)
