"""Challenges and what a bundle configures (SPEC §11.1).

Every row here is written by applying a bundle (`apps.benchmarks.services.apply`), except
`Participant`, which participants and hosts write. A phase stores everything its scoring,
leaderboards and limits need later (§11.2-§11.4): metrics, splits, limits, resources,
baselines, reveal and final selection, and a digest per data folder so that a change of the
scoring program or the reference data can be told from any other change (§11.6).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from apps.core.models_utils import new_hex_id


class Visibility(models.TextChoices):
    PUBLIC = "public", "Public"
    UNLISTED = "unlisted", "Unlisted"
    PRIVATE = "private", "Private"


class Participation(models.TextChoices):
    OPEN = "open", "Open"
    APPROVAL = "approval", "Approval"


class Challenge(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=new_hex_id, editable=False)
    slug = models.CharField(max_length=50, unique=True)
    title = models.CharField(max_length=200)
    # The Markdown as the bundle holds it, and its rendering (raw HTML dropped, then cleaned).
    description_source = models.TextField(blank=True, default="")
    description_html = models.TextField(blank=True, default="")
    visibility = models.CharField(max_length=10, choices=Visibility.choices)
    participation = models.CharField(max_length=10, choices=Participation.choices)
    max_team_size = models.PositiveIntegerField(default=1)
    bundle_version = models.PositiveIntegerField(default=1)
    bundle_sha256 = models.CharField(max_length=64)
    # The stored name of the bundle of `bundle_version` (Django's default storage).
    bundle_file = models.CharField(max_length=300)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=Q(max_team_size__gte=1), name="benchmarks_challenge_team_size_positive"
            ),
            models.CheckConstraint(
                condition=Q(bundle_version__gte=1), name="benchmarks_challenge_version_positive"
            ),
            models.CheckConstraint(
                condition=Q(visibility__in=Visibility.values),
                name="benchmarks_challenge_visibility_known",
            ),
            models.CheckConstraint(
                condition=Q(participation__in=Participation.values),
                name="benchmarks_challenge_participation_known",
            ),
        ]

    def __str__(self) -> str:
        return self.slug


class ChallengeHost(models.Model):
    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="hosts")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="hosted_challenges"
    )

    class Meta:
        ordering = ["challenge", "user"]
        constraints = [
            models.UniqueConstraint(fields=["challenge", "user"], name="benchmarks_host_once"),
        ]

    def __str__(self) -> str:
        return f"host {self.user_id} of {self.challenge_id}"


class PhaseKind(models.TextChoices):
    PREDICTIONS = "predictions", "Predictions"
    CODE = "code", "Code"


class Reveal(models.TextChoices):
    END = "end", "At the phase's end"
    NEVER = "never", "Never (a host may reveal)"
    TIME = "time", "At a given time"


class Phase(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=new_hex_id, editable=False)
    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="phases")
    slug = models.CharField(max_length=50)
    title = models.CharField(max_length=200)
    order = models.PositiveIntegerField(default=0)
    start = models.DateTimeField()
    end = models.DateTimeField(null=True, blank=True)
    kind = models.CharField(max_length=12, choices=PhaseKind.choices)
    # Folders inside the bundle ("" when the bundle names none), each ending in "/".
    input_data = models.CharField(max_length=300, blank=True, default="")
    public_data = models.CharField(max_length=300, blank=True, default="")
    reference_data = models.CharField(max_length=300)
    scoring_program = models.CharField(max_length=300)
    scoring_entrypoint = models.CharField(max_length=300)
    # sha256 over the members (name, size, CRC-32) of each folder: what changed in a bundle.
    input_data_digest = models.CharField(max_length=64, blank=True, default="")
    public_data_digest = models.CharField(max_length=64, blank=True, default="")
    reference_data_digest = models.CharField(max_length=64)
    scoring_program_digest = models.CharField(max_length=64)
    primary_metric = models.CharField(max_length=40)
    reveal = models.CharField(max_length=5, choices=Reveal.choices, default=Reveal.END)
    reveal_at = models.DateTimeField(null=True, blank=True)
    final_selection = models.PositiveIntegerField(default=0)
    file_types = models.JSONField(default=list)
    limit_per_day = models.PositiveIntegerField(null=True, blank=True)
    limit_total = models.PositiveIntegerField(null=True, blank=True)
    limit_concurrent = models.PositiveIntegerField(null=True, blank=True)
    timeout_seconds = models.PositiveIntegerField(null=True, blank=True)
    memory_mb = models.PositiveIntegerField(null=True, blank=True)
    # The scoring version the leaderboard serves (a `ScoringVersion.number` of this phase).
    scoring_version = models.PositiveIntegerField(default=1)
    # When the hidden splits became visible (the reveal's one write); None until then.
    revealed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["challenge", "order"]
        constraints = [
            models.UniqueConstraint(
                fields=["challenge", "slug"], name="benchmarks_phase_slug_unique"
            ),
            models.CheckConstraint(
                condition=Q(end__isnull=True) | Q(end__gt=F("start")),
                name="benchmarks_phase_end_after_start",
            ),
            models.CheckConstraint(
                condition=(Q(reveal=Reveal.TIME) & Q(reveal_at__isnull=False))
                | (~Q(reveal=Reveal.TIME) & Q(reveal_at__isnull=True)),
                name="benchmarks_phase_reveal_time_iff_time",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=PhaseKind.values), name="benchmarks_phase_kind_known"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.challenge_id}/{self.slug}"


class ScoringVersion(models.Model):
    """What scored a phase's submissions in one version: the scoring program and reference
    data folders of a stored bundle. A bundle that changes either (by digest) adds version
    n+1; the bundle file a version names is kept as long as the version exists (§11.6)."""

    phase = models.ForeignKey(Phase, on_delete=models.CASCADE, related_name="scoring_versions")
    number = models.PositiveIntegerField()
    bundle_file = models.CharField(max_length=300)
    scoring_program = models.CharField(max_length=300)
    scoring_entrypoint = models.CharField(max_length=300)
    reference_data = models.CharField(max_length=300)
    scoring_program_digest = models.CharField(max_length=64)
    reference_data_digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["phase", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["phase", "number"], name="benchmarks_scoring_version_once"
            ),
            models.CheckConstraint(
                condition=Q(number__gte=1), name="benchmarks_scoring_version_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.phase_id} v{self.number}"


class Direction(models.TextChoices):
    MAX = "max", "Higher is better"
    MIN = "min", "Lower is better"


class Metric(models.Model):
    phase = models.ForeignKey(Phase, on_delete=models.CASCADE, related_name="metrics")
    key = models.CharField(max_length=40)
    label = models.CharField(max_length=200)
    direction = models.CharField(max_length=3, choices=Direction.choices)
    precision = models.PositiveSmallIntegerField(default=4)
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["phase", "order"]
        constraints = [
            models.UniqueConstraint(fields=["phase", "key"], name="benchmarks_metric_key_unique"),
            models.CheckConstraint(
                condition=Q(direction__in=Direction.values),
                name="benchmarks_metric_direction_known",
            ),
        ]

    def __str__(self) -> str:
        return self.key


class Split(models.Model):
    """A set of scores per submission; every split but `public` is hidden until the reveal."""

    phase = models.ForeignKey(Phase, on_delete=models.CASCADE, related_name="splits")
    name = models.CharField(max_length=50)
    hidden = models.BooleanField()
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["phase", "order"]
        constraints = [
            models.UniqueConstraint(fields=["phase", "name"], name="benchmarks_split_name_unique"),
            models.CheckConstraint(
                condition=Q(hidden=True) | Q(name="public"),
                name="benchmarks_split_hidden_unless_public",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Baseline(models.Model):
    """A folder of the bundle scored like a submission, owned by the challenge (§11.2)."""

    phase = models.ForeignKey(Phase, on_delete=models.CASCADE, related_name="baselines")
    folder = models.CharField(max_length=300)
    digest = models.CharField(max_length=64)
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["phase", "order"]
        constraints = [
            models.UniqueConstraint(
                fields=["phase", "folder"], name="benchmarks_baseline_folder_unique"
            ),
        ]

    def __str__(self) -> str:
        return self.folder


class ParticipantStatus(models.TextChoices):
    APPROVED = "approved", "Approved"
    PENDING = "pending", "Pending"


class Participant(models.Model):
    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="participants")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="participations"
    )
    status = models.CharField(max_length=10, choices=ParticipantStatus.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    approved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["challenge", "created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["challenge", "user"], name="benchmarks_participant_once"
            ),
            models.CheckConstraint(
                condition=Q(status__in=ParticipantStatus.values),
                name="benchmarks_participant_status_known",
            ),
            models.CheckConstraint(
                condition=Q(status=ParticipantStatus.PENDING) | Q(approved_at__isnull=False),
                name="benchmarks_participant_approved_has_time",
            ),
        ]

    def __str__(self) -> str:
        return f"participant {self.user_id} of {self.challenge_id}"
