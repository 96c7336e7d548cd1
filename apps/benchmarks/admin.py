"""The benchmarks app in the admin, read-only: a challenge changes only by applying a bundle,
and teams, entries, scores, scoring versions and teams' best rows only through the services
that keep their rules (team sizes and locks, limits and refunds, best rows)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from apps.benchmarks.models import (
    Challenge,
    ChallengeHost,
    Entry,
    Metric,
    Participant,
    Phase,
    Score,
    ScoringVersion,
    Split,
    Team,
    TeamBest,
    TeamGrant,
    TeamMember,
)


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


class ServiceWrittenMixin(ReadOnlyMixin):
    """Rows only services write: no add, change or delete from the admin (deleting a team or
    an entry here would skip the rules their services keep)."""

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TeamMemberInline(ServiceWrittenMixin, admin.TabularInline[TeamMember, Team]):
    model = TeamMember
    extra = 0
    fields = ("user", "joined_at")
    readonly_fields = fields


@admin.register(Team)
class TeamAdmin(ServiceWrittenMixin, admin.ModelAdmin[Team]):
    list_display = ("name", "challenge", "created_at")
    list_select_related = ("challenge",)
    search_fields = ("name", "challenge__slug", "members__user__username")
    # The invite code is left out: whoever holds it may join the team.
    fields = ("id", "challenge", "name", "created_at")
    readonly_fields = fields
    inlines = (TeamMemberInline,)


@admin.register(Entry)
class EntryAdmin(ServiceWrittenMixin, admin.ModelAdmin[Entry]):
    list_display = (
        "submission",
        "phase",
        "team",
        "user",
        "counted",
        "refund_reason",
        "final",
        "failure",
        "created_at",
    )
    list_filter = ("counted", "final", "failure", "refund_reason")
    list_select_related = ("submission", "phase", "team", "user")
    search_fields = ("submission__id", "team__name", "user__username", "phase__challenge__slug")
    fields = (
        "submission",
        "phase",
        "team",
        "user",
        "counted",
        "refund_reason",
        "final",
        "failure",
        "scoring_logs",
        "created_at",
    )
    readonly_fields = fields


@admin.register(Score)
class ScoreAdmin(ServiceWrittenMixin, admin.ModelAdmin[Score]):
    list_display = ("phase", "version", "split", "entry", "baseline", "team", "submitted_at")
    list_filter = ("split", "version")
    list_select_related = ("phase", "entry", "baseline", "team")
    search_fields = ("phase__challenge__slug", "team__name", "entry__submission__id")
    fields = (
        "phase",
        "version",
        "split",
        "entry",
        "baseline",
        "team",
        "values",
        "metric_key",
        "order_key",
        "submitted_at",
        "created_at",
    )
    readonly_fields = fields


@admin.register(ScoringVersion)
class ScoringVersionAdmin(ServiceWrittenMixin, admin.ModelAdmin[ScoringVersion]):
    list_display = ("phase", "number", "bundle_file", "created_at")
    list_select_related = ("phase",)
    search_fields = ("phase__challenge__slug", "phase__slug", "bundle_file")
    fields = (
        "phase",
        "number",
        "bundle_file",
        "scoring_program",
        "scoring_entrypoint",
        "reference_data",
        "scoring_program_digest",
        "reference_data_digest",
        "created_at",
    )
    readonly_fields = fields


@admin.register(TeamBest)
class TeamBestAdmin(ServiceWrittenMixin, admin.ModelAdmin[TeamBest]):
    list_display = ("phase", "version", "split", "team", "score")
    list_filter = ("split", "version")
    list_select_related = ("phase", "team", "score")
    search_fields = ("phase__challenge__slug", "team__name")
    fields = ("phase", "version", "split", "team", "score", "metric_key", "order_key")
    readonly_fields = fields


@admin.register(TeamGrant)
class TeamGrantAdmin(ServiceWrittenMixin, admin.ModelAdmin[TeamGrant]):
    """Hosts' grants of extra submissions (made through the API, with who and why)."""

    list_display = ("team", "phase", "limit", "extra", "day", "granted_by", "created_at")
    list_select_related = ("team", "phase", "granted_by")
    search_fields = ("team__name", "phase__slug", "reason")
    fields = ("team", "phase", "limit", "extra", "day", "reason", "granted_by", "created_at")
    readonly_fields = fields
