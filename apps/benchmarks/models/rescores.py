"""Rescoring a phase in a new scoring version (SPEC §11.6).

- `Rescore`: one per (phase, version) made by a bundle that changed the scoring program or
  the reference data. `running` until every item is `done` or `failed`; then `switched` (the
  phase's `scoring_version` moved to it in the same transaction), or `cancelled` by a host, or
  `superseded` by a newer version's rescore.
- `RescoreItem`: one work item per (rescore, entry) or (rescore, baseline), a database
  constraint. Leased like a grading: a worker takes it (`processing`, a random
  `lease_token`, `lease_expires_at`, `attempts` + 1), runs stage 2 with no transaction held,
  and writes the outcome only if the lease is still its own. `failure` is the platform's
  account (`scoring_failed`, `invalid_predictions`, `worker_lost`), `logs` the scorer's
  output: both for hosts only.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from apps.benchmarks.models.challenges import Baseline, Phase
from apps.benchmarks.models.scores import Entry


class RescoreState(models.TextChoices):
    RUNNING = "running", "Running"
    SWITCHED = "switched", "Switched (the leaderboard serves this version)"
    CANCELLED = "cancelled", "Cancelled by a host"
    SUPERSEDED = "superseded", "Superseded by a newer version"


class RescoreItemStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    PROCESSING = "processing", "Processing"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class Rescore(models.Model):
    phase = models.ForeignKey(Phase, on_delete=models.CASCADE, related_name="rescores")
    version = models.PositiveIntegerField()
    state = models.CharField(
        max_length=12, choices=RescoreState.choices, default=RescoreState.RUNNING
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["phase", "version"]
        constraints = [
            models.UniqueConstraint(fields=["phase", "version"], name="benchmarks_rescore_once"),
            models.CheckConstraint(
                condition=Q(state__in=RescoreState.values),
                name="benchmarks_rescore_state_known",
            ),
        ]

    def __str__(self) -> str:
        return f"rescore of {self.phase_id} to v{self.version} ({self.state})"


class RescoreItem(models.Model):
    rescore = models.ForeignKey(Rescore, on_delete=models.CASCADE, related_name="items")
    entry = models.ForeignKey(
        Entry, on_delete=models.CASCADE, null=True, blank=True, related_name="rescore_items"
    )
    baseline = models.ForeignKey(
        Baseline, on_delete=models.CASCADE, null=True, blank=True, related_name="rescore_items"
    )
    status = models.CharField(
        max_length=12, choices=RescoreItemStatus.choices, default=RescoreItemStatus.PENDING
    )
    lease_token = models.CharField(max_length=64, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    failure = models.CharField(max_length=40, blank=True, default="")
    logs = models.TextField(blank=True, default="")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["rescore", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["rescore", "entry"],
                condition=Q(entry__isnull=False),
                name="benchmarks_rescore_entry_once",
            ),
            models.UniqueConstraint(
                fields=["rescore", "baseline"],
                condition=Q(baseline__isnull=False),
                name="benchmarks_rescore_baseline_once",
            ),
            models.CheckConstraint(
                condition=(Q(entry__isnull=False) & Q(baseline__isnull=True))
                | (Q(entry__isnull=True) & Q(baseline__isnull=False)),
                name="benchmarks_rescore_entry_xor_baseline",
            ),
            models.CheckConstraint(
                condition=Q(status__in=RescoreItemStatus.values),
                name="benchmarks_rescore_item_status_known",
            ),
        ]
        indexes = [
            # In id order within a state: a take's pick stops at the first free item
            # instead of sorting every open one (`rescore_takes`).
            models.Index(fields=["rescore", "status", "id"], name="benchmarks_rescore_item_next"),
        ]

    def __str__(self) -> str:
        return f"rescore item {self.entry_id or self.baseline_id} ({self.status})"
