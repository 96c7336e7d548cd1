"""Extra submissions a host grants a team in a phase (SPEC §11.4): who, when, why."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from apps.benchmarks.models.challenges import Phase
from apps.benchmarks.models.teams import Team


class GrantLimit(models.TextChoices):
    PER_DAY = "per_day", "Per day"
    TOTAL = "total", "Total"


class TeamGrant(models.Model):
    """`extra` more submissions on the phase's `limit` for the team; a per_day grant holds
    for the UTC day `day` only (None for a total grant)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="grants")
    phase = models.ForeignKey(Phase, on_delete=models.CASCADE, related_name="grants")
    limit = models.CharField(max_length=10, choices=GrantLimit.choices)
    extra = models.PositiveIntegerField()
    day = models.DateField(null=True, blank=True)
    reason = models.CharField(max_length=500, blank=True, default="")
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(limit="per_day") & Q(day__isnull=False))
                | (Q(limit="total") & Q(day__isnull=True)),
                name="benchmarks_teamgrant_day_iff_per_day",
            ),
        ]
        indexes = [
            models.Index(fields=["team", "phase", "limit"], name="benchmarks_grant_team_phase"),
        ]

    def __str__(self) -> str:
        return f"+{self.extra} {self.limit} for {self.team_id} in {self.phase_id}"
