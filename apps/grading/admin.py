"""Admin: grading attempts (read only), and their inline for the review app's submission view."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from apps.grading.models import GradingAttempt


class GradingAttemptInline(admin.TabularInline[GradingAttempt, Any]):
    model = GradingAttempt
    extra = 0
    can_delete = False
    fields = ("number", "outcome", "score", "exit_code", "reason", "worker", "started_at")
    readonly_fields = fields


@admin.register(GradingAttempt)
class GradingAttemptAdmin(admin.ModelAdmin[GradingAttempt]):
    list_display = ("submission", "number", "outcome", "score", "exit_code", "worker", "started_at")
    list_filter = ("outcome", "grader")
    search_fields = ("submission__id", "job__id", "lease_token", "worker")
    readonly_fields = (
        "submission",
        "job",
        "number",
        "lease_token",
        "lease_expires_at",
        "worker",
        "grader",
        "outcome",
        "exit_code",
        "score",
        "reason",
        "started_at",
        "finished_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
