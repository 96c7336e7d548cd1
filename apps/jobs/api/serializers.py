from __future__ import annotations

from typing import Any

from django.core.validators import ProhibitNullCharactersValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.jobs.models import Job, JobStatus


class RawCharField(serializers.CharField):
    """A CharField that leaves NUL and whitespace to the service, which has its own error code."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)
        self.validators = [
            v for v in self.validators if not isinstance(v, ProhibitNullCharactersValidator)
        ]


# 1-256 printable ASCII characters, no whitespace, no comma (SPEC §3, §10); the service checks
# it (400 `invalid_idempotency_key`), the schema states it.
IDEMPOTENCY_KEY_SCHEMA = {"type": "string", "pattern": "^[!-+\\--~]{1,256}$", "maxLength": 256}


@extend_schema_field(IDEMPOTENCY_KEY_SCHEMA)
class IdempotencyKeyField(RawCharField):
    pass


class JobSubmitInputSerializer(serializers.Serializer[Any]):
    submission_id = serializers.CharField(max_length=64)
    config = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="Job configuration (a JSON object; null is the same as absent, `{}`); "
        "`resource_class` picks the job's cost.",
    )
    idempotency_key = IdempotencyKeyField(
        required=False,
        allow_blank=True,
        help_text="1-256 printable ASCII characters, no whitespace. Or the Idempotency-Key "
        "header (both given and different: 400 idempotency_key_mismatch).",
    )
    idempotency_ttl_hours = serializers.IntegerField(
        required=False, min_value=1, max_value=168, help_text="How long the key lives (hours)."
    )
    reservation_id = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=64,
        help_text="An active reservation of yours, consumed by the new job.",
    )

    def validate_config(self, value: Any) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise serializers.ValidationError("Must be a JSON object.")
        return value


_SUBMIT_FIELDS = frozenset(
    ("submission_id", "config", "idempotency_key", "idempotency_ttl_hours", "reservation_id")
)


def _plain_text(value: Any, max_length: int | None, *, trimmed: bool) -> bool:
    """`value` is a string a CharField keeps as is: ASCII (no surrogate), no NUL, within
    `max_length`, and (`trimmed`) without whitespace around it."""
    return (
        type(value) is str
        and value.isascii()
        and "\x00" not in value
        and (max_length is None or len(value) <= max_length)
        and (not trimmed or value.strip() == value)
    )


def submit_input_plain(data: Any) -> dict[str, Any] | None:
    """The values `JobSubmitInputSerializer` validates `data` to, when every given value is
    one the serializer keeps unchanged (plain ASCII strings, an object or null config, an int
    TTL in range); None for anything else, which the serializer then validates (and words
    its errors). The usual body skips building the serializer and its fields per request."""
    if type(data) is not dict or not data.keys() <= _SUBMIT_FIELDS:
        return None
    submission_id = data.get("submission_id")
    if not _plain_text(submission_id, 64, trimmed=True) or not submission_id:
        return None
    values: dict[str, Any] = {"submission_id": submission_id}
    if "config" in data:
        config = data["config"]
        if config is None:
            config = {}
        elif type(config) is not dict:
            return None
        values["config"] = config
    if "idempotency_key" in data:
        key = data["idempotency_key"]
        if not _plain_text(key, None, trimmed=False):
            return None
        values["idempotency_key"] = key
    if "idempotency_ttl_hours" in data:
        ttl = data["idempotency_ttl_hours"]
        if type(ttl) is not int or not 1 <= ttl <= 168:
            return None
        values["idempotency_ttl_hours"] = ttl
    if "reservation_id" in data:
        reservation = data["reservation_id"]
        if reservation is not None and not _plain_text(reservation, 64, trimmed=True):
            return None
        values["reservation_id"] = reservation
    return values


class JobReplayOutputSerializer(serializers.Serializer[Any]):
    """A `SubmitResult` answered as a replay of its key's job."""

    success = serializers.SerializerMethodField()
    job_id = serializers.CharField(source="job.pk")
    status = serializers.ChoiceField(
        source="job.status", choices=JobStatus.choices, help_text="The job's current status."
    )
    idempotent_hit = serializers.SerializerMethodField()

    def get_success(self, result: Any) -> bool:
        return True

    def get_idempotent_hit(self, result: Any) -> bool:
        return not result.created


class JobSubmitOutputSerializer(JobReplayOutputSerializer):
    """A `SubmitResult` that made a new job."""

    quota_warnings = serializers.ListField(child=serializers.CharField())
    cost_limit_warning = serializers.CharField(allow_null=True)


class JobOutputSerializer(serializers.ModelSerializer[Job]):
    job_id = serializers.CharField(source="id", read_only=True)
    submission_id = serializers.CharField(read_only=True)
    submission_status = serializers.CharField(
        source="submission.status",
        read_only=True,
        help_text="The graded submission's state (`review_pending` once grading asked a human).",
    )
    score = serializers.FloatField(
        source="submission.score", read_only=True, allow_null=True, help_text="Its score, if any."
    )

    class Meta:
        model = Job
        fields = (
            "job_id",
            "submission_id",
            "status",
            "submission_status",
            "score",
            "resource_class",
            "cost",
            "config",
            "error",
            "created_at",
            "started_at",
            "finished_at",
        )
        read_only_fields = fields


class JobListQuerySerializer(serializers.Serializer[Any]):
    status = serializers.ChoiceField(choices=JobStatus.choices, required=False)


class JobLogsOutputSerializer(serializers.Serializer[Any]):
    job_id = serializers.CharField(source="pk")
    status = serializers.ChoiceField(choices=JobStatus.choices)
    logs = serializers.CharField(
        allow_blank=True, help_text="The grader's captured output (capped), empty until it ran."
    )
    error = serializers.CharField(allow_blank=True)


def submit_output(result: Any) -> dict[str, Any]:
    """What `JobSubmitOutputSerializer` (a new job) or `JobReplayOutputSerializer` (a replay)
    renders for a `SubmitResult`, built directly: the same keys, order and types, without a
    serializer and its fields per request (tests/jobs compare the two)."""
    job = result.job
    body: dict[str, Any] = {
        "success": True,
        "job_id": str(job.pk),
        "status": str(job.status),
        "idempotent_hit": not result.created,
    }
    if result.created:
        body["quota_warnings"] = [str(warning) for warning in result.quota_warnings]
        warning = result.cost_limit_warning
        body["cost_limit_warning"] = None if warning is None else str(warning)
    return body
