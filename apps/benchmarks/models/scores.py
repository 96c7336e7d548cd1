"""Phase submissions and their scores (SPEC §11.2-§11.3).

- `Entry`: a submission made to a phase, by a user for a team; `counted` and `refund_reason`
  are the limits' bookkeeping (§11.4), `final` the team's selection for hidden splits,
  `failure` the scoring failure's code and `scoring_logs` what only hosts may read.
- `Score`: one split's metrics of one entry or baseline in one scoring version, written only
  by stage 2 (the host's scoring program). `metric_key` encodes the metrics in the phase's
  order and directions so that a smaller key is a better row (`apps.benchmarks.ranking`);
  `order_key` adds the submission time, the last tie-break.
- `TeamBest`: each team's best score per (phase, version, split), kept in the transaction
  that writes a score, so that a leaderboard page is an index range, not a scan of all
  scores.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from apps.benchmarks.models.challenges import Baseline, Phase
from apps.benchmarks.models.teams import Team
from apps.submissions.models import Submission


class Entry(models.Model):
    submission = models.OneToOneField(
        Submission, on_delete=models.CASCADE, primary_key=True, related_name="phase_entry"
    )
    phase = models.ForeignKey(Phase, on_delete=models.CASCADE, related_name="entries")
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="entries")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="phase_entries"
    )
    counted = models.BooleanField(default=False)
    # When the entry was last counted (its enqueue): the UTC day its per_day use falls on.
    counted_at = models.DateTimeField(null=True, blank=True)
    refund_reason = models.CharField(max_length=40, blank=True, default="")
    final = models.BooleanField(default=False)
    # Why scoring failed, when it did: `no_predictions`, `invalid_predictions` (the
    # participant's fault) or `scoring_failed` (the platform's); "" otherwise.
    failure = models.CharField(max_length=40, blank=True, default="")
    # The scoring program's output and the platform's account of a scoring failure: for
    # hosts and staff only, never shown to a participant.
    scoring_logs = models.TextField(blank=True, default="")
    # A code phase's predictions as its run stage left them (a stored .tar.gz), scored again
    # by each new scoring version (SPEC §11.6); "" for a predictions phase (its files are).
    kept_predictions = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["phase", "created_at"]
        indexes = [
            models.Index(fields=["phase", "team"], name="benchmarks_entry_phase_team"),
        ]

    def __str__(self) -> str:
        return f"entry {self.submission_id} in {self.phase_id}"


class Score(models.Model):
    phase = models.ForeignKey(Phase, on_delete=models.CASCADE, related_name="scores")
    version = models.PositiveIntegerField()
    split = models.CharField(max_length=50)
    entry = models.ForeignKey(
        Entry, on_delete=models.CASCADE, null=True, blank=True, related_name="scores"
    )
    baseline = models.ForeignKey(
        Baseline, on_delete=models.CASCADE, null=True, blank=True, related_name="scores"
    )
    team = models.ForeignKey(
        Team, on_delete=models.CASCADE, null=True, blank=True, related_name="scores"
    )
    values = models.JSONField()
    metric_key = models.TextField()
    order_key = models.TextField()
    submitted_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["phase", "version", "split", "order_key"]
        constraints = [
            models.UniqueConstraint(
                fields=["entry", "version", "split"],
                condition=Q(entry__isnull=False),
                name="benchmarks_score_entry_once",
            ),
            models.UniqueConstraint(
                fields=["baseline", "version", "split"],
                condition=Q(baseline__isnull=False),
                name="benchmarks_score_baseline_once",
            ),
            models.CheckConstraint(
                condition=(
                    Q(entry__isnull=False) & Q(baseline__isnull=True) & Q(team__isnull=False)
                )
                | (Q(entry__isnull=True) & Q(baseline__isnull=False) & Q(team__isnull=True)),
                name="benchmarks_score_entry_xor_baseline",
            ),
        ]
        indexes = [
            models.Index(
                fields=["phase", "version", "split", "team", "order_key"],
                name="benchmarks_score_team_order",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.split} v{self.version} of {self.entry_id or self.baseline_id}"


class TeamBest(models.Model):
    phase = models.ForeignKey(Phase, on_delete=models.CASCADE, related_name="+")
    version = models.PositiveIntegerField()
    split = models.CharField(max_length=50)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    score = models.ForeignKey(Score, on_delete=models.CASCADE, related_name="+")
    metric_key = models.TextField()
    order_key = models.TextField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["phase", "version", "split", "team"], name="benchmarks_team_best_once"
            ),
        ]
        indexes = [
            models.Index(
                fields=["phase", "version", "split", "order_key"],
                name="benchmarks_team_best_order",
            ),
            models.Index(
                fields=["phase", "version", "split", "metric_key"],
                name="benchmarks_team_best_rank",
            ),
        ]

    def __str__(self) -> str:
        return f"best of {self.team_id} in {self.phase_id} {self.split} v{self.version}"
