"""Per-user quota policies and concurrent-job slot reservations."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db import models

from apps.core.models_utils import new_hex_id


class QuotaPolicy(models.Model):
    """One row per user. An empty limit means "use the settings default".

    The row is also the user's quota lock: every reservation and job creation of a user locks
    it first (`select_for_update`), so counting and inserting are serialized per user.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="quota_policy"
    )
    max_concurrent_jobs = models.PositiveIntegerField(null=True, blank=True)
    max_jobs_per_day = models.PositiveIntegerField(null=True, blank=True)
    monthly_cost_limit = models.FloatField(null=True, blank=True)
    # Bytes of submission files (drafts and sealed) the user may keep (SPEC §10).
    max_storage_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    # Extra concurrent slots granted for a period (schedule topic `quota.boost`); added to the
    # effective concurrent-job limit.
    concurrent_boost = models.IntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "quota policies"

    def __str__(self) -> str:
        return f"quota policy of user {self.user_id}"


class ReservationState(models.TextChoices):
    ACTIVE = "active", "Active"
    CONSUMED = "consumed", "Consumed"
    RELEASED = "released", "Released"
    EXPIRED = "expired", "Expired"


class Reservation(models.Model):
    """A concurrent-job slot held before a job exists (e.g. during a long upload).

    The state is never stored: it is computed from the timestamps at query time, so an expired
    reservation stops counting the instant `expires_at` passes, with no background job.
    """

    id = models.CharField(primary_key=True, max_length=32, default=new_hex_id, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="quota_reservations"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    consumed_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(null=True, blank=True)
    # The job that consumed it (a plain id: quotas do not depend on the jobs app).
    job_id = models.CharField(max_length=32, blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(consumed_at__isnull=True) | models.Q(released_at__isnull=True),
                name="quotas_reservation_consumed_or_released",
            ),
        ]
        indexes = [
            models.Index(fields=["user", "expires_at"], name="quotas_res_user_expires"),
            models.Index(fields=["expires_at"], name="quotas_res_expires"),
        ]

    def __str__(self) -> str:
        return f"reservation {self.id}"

    def state_at(self, now: dt.datetime) -> ReservationState:
        if self.consumed_at is not None:
            return ReservationState.CONSUMED
        if self.released_at is not None:
            return ReservationState.RELEASED
        if self.expires_at <= now:
            return ReservationState.EXPIRED
        return ReservationState.ACTIVE
