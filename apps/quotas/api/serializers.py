from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.quotas.models import Reservation, ReservationState


class ReservationTtlInputSerializer(serializers.Serializer[Any]):
    """How long the reservation holds its slot."""

    # Built per instance: the limit is a setting, and the schema's `maximum` must be the
    # server's.

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        maximum = int(settings.QUOTA_RESERVATION_MAX_TTL)
        return {
            "ttl_seconds": serializers.IntegerField(
                required=False,
                min_value=10,
                max_value=maximum,
                help_text="Seconds the slot is held (default QUOTA_RESERVATION_TTL = "
                f"{int(settings.QUOTA_RESERVATION_TTL)}; 10 to QUOTA_RESERVATION_MAX_TTL = "
                f"{maximum}).",
            )
        }


class ReservationOutputSerializer(serializers.Serializer[Any]):
    reservation_id = serializers.CharField(source="id")
    state = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    job_id = serializers.CharField(allow_blank=True, help_text="The job that consumed it.")

    @extend_schema_field(serializers.ChoiceField(choices=ReservationState.choices))
    def get_state(self, reservation: Reservation) -> ReservationState:
        now = self.context.get("now") or timezone.now()
        return reservation.state_at(now)


class QuotaMeOutputSerializer(serializers.Serializer[Any]):
    max_concurrent_jobs = serializers.IntegerField()
    active_jobs = serializers.IntegerField()
    active_reservations = serializers.IntegerField()
    available_slots = serializers.IntegerField()
    max_jobs_per_day = serializers.IntegerField()
    jobs_last_24h = serializers.IntegerField()
    monthly_cost_limit = serializers.FloatField(allow_null=True)
    cost_this_month = serializers.FloatField()
    storage_bytes = serializers.IntegerField(
        help_text="Bytes of your submission files (drafts and sealed) and of your resumable "
        "uploads not attached yet, stored now."
    )
    max_storage_bytes = serializers.IntegerField(help_text="Your storage limit in bytes.")
    warnings = serializers.ListField(child=serializers.CharField())
    active_lives = serializers.IntegerField(
        help_text="Your schedule Lives that are not finished (not Dead, not Stillbirth)."
    )
    max_lives = serializers.IntegerField(
        help_text="At most this many (SCHEDULE_MAX_LIVES_PER_USER); beyond, 429 too_many_lives."
    )
    max_upload_file_size = serializers.IntegerField(
        help_text="Bytes of one file sent in one request (MAX_UPLOAD_FILE_SIZE); larger files "
        "go through /api/uploads/."
    )
    max_resumable_upload_size = serializers.IntegerField(
        help_text="Bytes of one resumable upload (MAX_RESUMABLE_UPLOAD_SIZE)."
    )
