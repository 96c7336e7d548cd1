"""Challenges in the admin: read-only (a challenge changes only by applying a bundle)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from apps.benchmarks.models import Challenge, ChallengeHost, Metric, Participant, Phase, Split


class ReadOnlyMixin:
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class HostInline(ReadOnlyMixin, admin.TabularInline[ChallengeHost, Challenge]):
    model = ChallengeHost
    extra = 0


class PhaseInline(ReadOnlyMixin, admin.TabularInline[Phase, Challenge]):
    model = Phase
    extra = 0
    fields = ("slug", "title", "kind", "start", "end", "primary_metric", "reveal")
    show_change_link = True


@admin.register(Challenge)
class ChallengeAdmin(ReadOnlyMixin, admin.ModelAdmin[Challenge]):
    list_display = ("slug", "title", "visibility", "participation", "bundle_version", "updated_at")
    list_filter = ("visibility", "participation")
    search_fields = ("slug", "title")
    inlines = (HostInline, PhaseInline)


class MetricInline(ReadOnlyMixin, admin.TabularInline[Metric, Phase]):
    model = Metric
    extra = 0


class SplitInline(ReadOnlyMixin, admin.TabularInline[Split, Phase]):
    model = Split
    extra = 0


@admin.register(Phase)
class PhaseAdmin(ReadOnlyMixin, admin.ModelAdmin[Phase]):
    list_display = ("challenge", "slug", "kind", "start", "end", "reveal")
    list_filter = ("kind", "reveal")
    search_fields = ("challenge__slug", "slug")
    inlines = (MetricInline, SplitInline)


@admin.register(Participant)
class ParticipantAdmin(ReadOnlyMixin, admin.ModelAdmin[Participant]):
    list_display = ("challenge", "user", "status", "created_at", "approved_at")
    list_filter = ("status",)
    search_fields = ("challenge__slug", "user__username")
