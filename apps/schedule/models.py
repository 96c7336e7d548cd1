"""Lives (reservations), their Plans (the actions they trigger) and every execution attempt."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from apps.core.models_utils import new_hex_id
from apps.core.transitions import TransitionTable


class ScheduleType(models.TextChoices):
    POINT = "point", "point"
    TERM = "term", "term"


class LifeState(models.TextChoices):
    INEXISTENT = "Inexistent", "Inexistent"
    ALIVE = "Alive", "Alive"
    DEAD = "Dead", "Dead"
    STILLBIRTH = "Stillbirth", "Stillbirth"


class PlanKind(models.TextChoices):
    BIRTH = "birth", "birth"
    DEATH = "death", "death"


class PlanState(models.TextChoices):
    STANDBY = "Standby", "Standby"
    PRESET = "Preset", "Preset"
    RUNNING = "Running", "Running"
    DONE = "Done", "Done"
    FAILED = "Failed", "Failed"
    INVALIDATED = "Invalidated", "Invalidated"
    CANCELLED = "Cancelled", "Cancelled"


LIFE_TRANSITIONS: TransitionTable[str] = TransitionTable(
    "Life",
    {
        LifeState.INEXISTENT: frozenset({LifeState.ALIVE, LifeState.DEAD, LifeState.STILLBIRTH}),
        LifeState.ALIVE: frozenset({LifeState.DEAD}),
    },
    field="state",
)

# Beyond the SPEC's arrows: Preset -> Standby (a claim released: watcher shutdown, PATCH),
# Preset -> Preset (re-armed: a dead watcher's expired claim taken over, or a cancel arming a
# term Life's death now), Running -> Standby (a retry scheduled `retry_interval` /
# `DEATH_RETRY_INTERVAL` later) and Failed -> Standby (an operator's retry). Every path still
# ends in Done, Failed, Invalidated or Cancelled. Every writer of `Plan.state` goes through this
# table (`schedule.services.plans.plan_set_state` / `plans_set_state`).
PLAN_TRANSITIONS: TransitionTable[str] = TransitionTable(
    "Plan",
    {
        PlanState.STANDBY: frozenset(
            {PlanState.PRESET, PlanState.INVALIDATED, PlanState.CANCELLED}
        ),
        PlanState.PRESET: frozenset(
            {PlanState.PRESET, PlanState.RUNNING, PlanState.STANDBY, PlanState.CANCELLED}
        ),
        PlanState.RUNNING: frozenset({PlanState.DONE, PlanState.FAILED, PlanState.STANDBY}),
        PlanState.FAILED: frozenset({PlanState.STANDBY}),
    },
    field="state",
)

LIVING_STATES = (LifeState.INEXISTENT, LifeState.ALIVE)
PENDING_PLAN_STATES = (PlanState.STANDBY, PlanState.PRESET)


class ScheduleResource(models.Model):
    """One row per `resource_id`: the lock that serializes bookings of that resource."""

    resource_id = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.resource_id


class Life(models.Model):
    """A reservation. `guard_start`/`guard_end` is its execution span widened by half of
    `EXECUTION_DELAY_GUARD_TIME` on each side (fixed at booking), so two Lives of one resource
    conflict exactly when their guarded ranges intersect."""

    life_uuid = models.CharField(max_length=32, unique=True, default=new_hex_id)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="lives"
    )
    schedule_type = models.CharField(max_length=10, choices=ScheduleType.choices)
    resource_id = models.CharField(max_length=200, blank=True, default="")
    birth_time = models.DateTimeField()
    death_time = models.DateTimeField(null=True, blank=True)
    birth_action = models.JSONField()
    death_action = models.JSONField(null=True, blank=True)
    state = models.CharField(max_length=20, choices=LifeState.choices, default=LifeState.INEXISTENT)
    guard_start = models.DateTimeField()
    guard_end = models.DateTimeField()
    fingerprint = models.CharField(max_length=64, help_text="sha256 of the normalized booking.")
    # The id (not secret) of the API token that booked or last changed the Life; NULL for a
    # session or a password. Not a foreign key: revoking deletes the token's row, and its Life
    # must then be refused at birth (the executor), never fall back to NULL's meaning.
    booking_token_id = models.CharField(  # noqa: DJ001 - NULL: booked without a token
        max_length=32, null=True, blank=True, editable=False
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["birth_time", "pk"]
        verbose_name_plural = "lives"
        indexes = [
            models.Index(
                fields=["resource_id", "guard_start"],
                name="schedule_life_resource_idx",
                condition=Q(state__in=["Inexistent", "Alive"]),
            ),
            models.Index(fields=["owner", "birth_time"], name="schedule_life_owner_idx"),
            models.Index(fields=["state", "birth_time"], name="schedule_life_state_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(guard_start__lte=models.F("guard_end")),
                name="schedule_life_guard_ordered",
            ),
            models.CheckConstraint(
                condition=Q(schedule_type="point", death_time__isnull=True)
                | Q(schedule_type="term", death_time__gt=models.F("birth_time")),
                name="schedule_life_type_times",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.schedule_type} {self.life_uuid} ({self.state})"

    @property
    def end_time(self) -> Any:
        return self.death_time or self.birth_time


class Plan(models.Model):
    """One action of a Life. `due_at` is when it should run next (its `time`, or a retry's).

    A watcher claims a plan by moving it to Preset with `lease_owner`, `lease_expires_at` and a
    fresh `arm_token`; only a delivery carrying the current token can move it to Running.
    """

    life = models.ForeignKey(Life, on_delete=models.CASCADE, related_name="plans")
    kind = models.CharField(max_length=10, choices=PlanKind.choices)
    time = models.DateTimeField()
    due_at = models.DateTimeField()
    action = models.JSONField()
    state = models.CharField(max_length=20, choices=PlanState.choices, default=PlanState.STANDBY)
    webhook_id = models.CharField(max_length=40, unique=True)
    arm_token = models.CharField(max_length=32, blank=True, default="")
    lease_owner = models.CharField(max_length=100, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempts_count = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["time", "pk"]
        indexes = [
            models.Index(
                fields=["due_at"],
                name="schedule_plan_pending_idx",
                condition=Q(state__in=["Standby", "Preset"]),
            ),
            # The /ops/ page's plan lateness over the last hour.
            models.Index(fields=["started_at"], name="schedule_plan_started_idx"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["life", "kind"], name="schedule_plan_one_per_kind"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} of {self.life_id} at {self.time.isoformat()} ({self.state})"


class PlanAttempt(models.Model):
    """One HTTP request made for a plan: status code (599 = connection error/timeout) or a
    refusal, how long it took, and the start of the response body."""

    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    duration_ms = models.FloatField(default=0)
    response_excerpt = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["plan", "number"]
        constraints = [
            models.UniqueConstraint(fields=["plan", "number"], name="schedule_attempt_number"),
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} of plan {self.plan_id}: {self.status_code}"

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


class TaskRun(models.Model):
    """A call of POST /api/schedule/tasks/: runs its topic's handler once on a worker.

    `key` is the caller's `webhook-id` when a plan made the call, so the retries of one plan
    never run a handler twice.
    """

    class State(models.TextChoices):
        PENDING = "pending", "pending"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    task_id = models.CharField(max_length=32, unique=True, default=new_hex_id)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="schedule_tasks"
    )
    topic = models.CharField(max_length=100)
    content = models.JSONField(default=dict, blank=True)
    key = models.CharField(max_length=64, null=True, blank=True, unique=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.topic} ({self.state})"


TASK_RUN_TRANSITIONS: TransitionTable[str] = TransitionTable(
    "Task run",
    {TaskRun.State.PENDING: frozenset({TaskRun.State.DONE, TaskRun.State.FAILED})},
    field="state",
)


class ConsumedSignature(models.Model):
    """A self-call signature the platform accepted: each is valid once (`selfcalls`).

    `digest` is the SHA-256 of the signature. Rows older than twice the timestamp tolerance
    can match no fresh request and are deleted by the `schedule` cleanup.
    """

    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="consumed_signatures")
    attempt = models.PositiveIntegerField()
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["created_at"], name="schedule_signature_created_idx")]
        constraints = [
            models.UniqueConstraint(fields=["digest"], name="schedule_signature_used_once"),
        ]

    def __str__(self) -> str:
        return f"signature of plan {self.plan_id}, attempt {self.attempt}"
