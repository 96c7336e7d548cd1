"""Admin: Lives with their Plans inline, Plans with every attempt; actions call services."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.core.exceptions import DomainError
from apps.schedule.models import Life, Plan, PlanAttempt, PlanState, ScheduleResource, TaskRun
from apps.schedule.services.lives import life_cancel
from apps.schedule.services.plans import plan_retry


class PlanInline(admin.TabularInline[Plan, Life]):
    model = Plan
    extra = 0
    can_delete = False
    show_change_link = True
    fields = ["kind", "time", "due_at", "state", "attempts_count", "lease_owner", "last_attempt"]
    readonly_fields = [
        "kind",
        "time",
        "due_at",
        "state",
        "attempts_count",
        "lease_owner",
        "last_attempt",
    ]

    @admin.display(description="last attempt")
    def last_attempt(self, plan: Plan) -> str:
        attempt = plan.attempts.order_by("-number").first()
        if attempt is None:
            return "-"
        return f"#{attempt.number}: {attempt.status_code or attempt.error}"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class PlanAttemptInline(admin.TabularInline[PlanAttempt, Plan]):
    model = PlanAttempt
    extra = 0
    can_delete = False
    fields = ["number", "started_at", "status_code", "duration_ms", "error", "response_excerpt"]
    readonly_fields = [
        "number",
        "started_at",
        "status_code",
        "duration_ms",
        "error",
        "response_excerpt",
    ]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Life)
class LifeAdmin(admin.ModelAdmin[Life]):
    list_display = [
        "life_uuid",
        "owner",
        "schedule_type",
        "resource_id",
        "state",
        "birth_time",
        "death_time",
    ]
    list_filter = ["state", "schedule_type", "resource_id"]
    search_fields = ["life_uuid", "resource_id", "owner__username"]
    readonly_fields = [
        "life_uuid",
        "owner",
        "schedule_type",
        "resource_id",
        "state",
        "birth_time",
        "death_time",
        "birth_action",
        "death_action",
        "guard_start",
        "guard_end",
        "fingerprint",
        "created_at",
        "updated_at",
        "attempts_total",
    ]
    inlines = [PlanInline]
    actions = ["cancel_lives", "retry_failed_plans"]

    @admin.display(description="attempts")
    def attempts_total(self, life: Life) -> int:
        return PlanAttempt.objects.filter(plan__life=life).count()

    @admin.action(
        description="Cancel the selected Lives (a failing death stops retrying)",
        permissions=("change",),
    )
    def cancel_lives(self, request: HttpRequest, queryset: QuerySet[Life]) -> None:
        done = 0
        for life in queryset:
            try:
                life_cancel(life_uuid=life.life_uuid, user=None, operator=True)
                done += 1
            except DomainError as error:
                self.message_user(request, f"{life.life_uuid}: {error.message}", messages.WARNING)
        self.message_user(request, f"Cancelled {done} Lives.")

    @admin.action(
        description="Retry the failed plans of the selected Lives",
        permissions=("change",),
    )
    def retry_failed_plans(self, request: HttpRequest, queryset: QuerySet[Life]) -> None:
        _retry(self, request, Plan.objects.filter(life__in=queryset, state=PlanState.FAILED))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


def _retry(model_admin: admin.ModelAdmin[Any], request: HttpRequest, plans: QuerySet[Plan]) -> None:
    done = 0
    for plan in plans:
        try:
            plan_retry(plan_id=plan.pk)
            done += 1
        except DomainError as error:
            model_admin.message_user(request, f"plan {plan.pk}: {error.message}", messages.WARNING)
    model_admin.message_user(request, f"Retrying {done} plans.")


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin[Plan]):
    list_display = [
        "pk",
        "life",
        "kind",
        "time",
        "due_at",
        "state",
        "attempts_count",
        "lease_owner",
    ]
    list_filter = ["state", "kind"]
    search_fields = ["life__life_uuid", "webhook_id", "lease_owner"]
    readonly_fields = [
        "life",
        "kind",
        "time",
        "due_at",
        "action",
        "state",
        "webhook_id",
        "arm_token",
        "lease_owner",
        "lease_expires_at",
        "attempts_count",
        "started_at",
        "finished_at",
        "created_at",
        "updated_at",
    ]
    inlines = [PlanAttemptInline]
    actions = ["retry_failed"]

    @admin.action(description="Retry the selected failed plans", permissions=("change",))
    def retry_failed(self, request: HttpRequest, queryset: QuerySet[Plan]) -> None:
        _retry(self, request, queryset.filter(state=PlanState.FAILED))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(PlanAttempt)
class PlanAttemptAdmin(admin.ModelAdmin[PlanAttempt]):
    list_display = ["plan", "number", "started_at", "status_code", "duration_ms", "succeeded"]
    list_filter = ["status_code"]
    search_fields = ["plan__life__life_uuid", "error"]
    readonly_fields = [
        "plan",
        "number",
        "started_at",
        "status_code",
        "duration_ms",
        "error",
        "response_excerpt",
        "succeeded",
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(ScheduleResource)
class ScheduleResourceAdmin(admin.ModelAdmin[ScheduleResource]):
    list_display = ["resource_id", "created_at"]
    list_filter = ["created_at"]
    search_fields = ["resource_id"]
    readonly_fields = ["resource_id", "created_at"]


@admin.register(TaskRun)
class TaskRunAdmin(admin.ModelAdmin[TaskRun]):
    list_display = ["task_id", "owner", "topic", "state", "created_at", "finished_at"]
    list_filter = ["state", "topic"]
    search_fields = ["task_id", "topic", "owner__username", "key"]
    readonly_fields = [
        "task_id",
        "owner",
        "topic",
        "content",
        "key",
        "state",
        "error",
        "created_at",
        "finished_at",
    ]
