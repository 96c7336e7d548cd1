"""Input/Output serializers of the schedule API (SPEC §6)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.api.converters import LIFE_UUID_PATTERN
from apps.core.api.serializers import UserSerializer
from apps.schedule.models import (
    Life,
    LifeState,
    Plan,
    PlanAttempt,
    PlanKind,
    PlanState,
    ScheduleType,
    TaskRun,
)
from apps.schedule.topics import topic_names

METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


# One case of each method in the schema: generated clients make an enum of it, and an enum
# whose values differ only in case has duplicate member names (openapi-python-client refuses
# the schema). The pattern still admits the lower case that older clients send.
_METHOD_PATTERN = "^(" + "|".join([*METHODS, *(m.lower() for m in METHODS)]) + ")$"


@extend_schema_field(
    {
        "type": "string",
        "pattern": _METHOD_PATTERN,
        "description": f"An HTTP method: {', '.join(METHODS)} (or the same in lower case).",
        "example": "POST",
    }
)
class MethodField(serializers.ChoiceField):
    """An HTTP method in upper or lower case (both are in use by existing clients), stored
    upper."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=[*METHODS, *(m.lower() for m in METHODS)], **kwargs)

    def to_internal_value(self, data: Any) -> str:
        return str(super().to_internal_value(data)).upper()


@extend_schema_field({"type": "string", "enum": topic_names()})
class TopicField(serializers.CharField):
    """A registered topic. The schema lists them; the service refuses any other with its own
    code (`unknown_topic`), so the check is not repeated here."""


class ActionSerializer(serializers.Serializer[Any]):
    path = serializers.CharField(
        max_length=2000,
        # The target rules judge exactly what the client sent: a path with whitespace is refused,
        # never silently trimmed into another one.
        trim_whitespace=False,
        help_text="An API route of the platform ('/api/...', no whitespace or control "
        "characters) or an absolute http(s) URL whose host is in "
        "SCHEDULE_WEBHOOK_ALLOWED_HOSTS.",
    )
    method = MethodField()
    headers = serializers.DictField(
        child=serializers.CharField(max_length=2000), required=False, allow_empty=True
    )
    body = serializers.JSONField(required=False, allow_null=True)
    connect_timeout = serializers.FloatField(required=False, min_value=0.1, max_value=60)
    request_timeout = serializers.FloatField(required=False, min_value=0.1, max_value=300)
    retry_count = serializers.IntegerField(required=False, min_value=0, max_value=20)
    retry_interval = serializers.FloatField(required=False, min_value=0, max_value=86400)


class TermSerializer(serializers.Serializer[Any]):
    birth_time = serializers.CharField(
        required=False, max_length=64, help_text="'YYYY-MM-DD HH:MM:SS' or ISO 8601 with offset."
    )
    death_time = serializers.CharField(required=False, max_length=64)


class LifeCreateInputSerializer(serializers.Serializer[Any]):
    life_uuid = serializers.RegexField(
        f"^{LIFE_UUID_PATTERN}$",
        required=False,
        max_length=36,
        help_text="Your own id for the Life: 32 hex digits, any case, dashes of the 8-4-4-4-12 "
        "form optional. Default: a new one.",
    )
    schedule_type = serializers.ChoiceField(choices=ScheduleType.choices)
    resource_id = serializers.CharField(required=False, allow_blank=True, max_length=200)
    term = TermSerializer(required=False)
    birth_time = serializers.CharField(required=False, max_length=64)
    death_time = serializers.CharField(required=False, max_length=64)
    birth = ActionSerializer(required=False)
    death = ActionSerializer(required=False)
    birth_action = ActionSerializer(required=False)
    death_action = ActionSerializer(required=False)


class LifeChangeInputSerializer(serializers.Serializer[Any]):
    """Only times and actions change: any other field (`schedule_type`, `resource_id`,
    `owner`, ...) is refused by name (400 `invalid_schedule`), never silently dropped."""

    refuses_unknown_fields = True

    term = TermSerializer(required=False)
    birth_time = serializers.CharField(required=False, max_length=64)
    death_time = serializers.CharField(required=False, max_length=64)
    birth = ActionSerializer(required=False)
    death = ActionSerializer(required=False)
    birth_action = ActionSerializer(required=False)
    death_action = ActionSerializer(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        sent = self.initial_data if isinstance(self.initial_data, dict) else {}
        unknown = sorted(set(sent) - set(self.fields))
        if unknown:
            raise serializers.ValidationError(
                {name: ["This field cannot be changed."] for name in unknown}
            )
        return attrs


class LifeListFilterSerializer(serializers.Serializer[Any]):
    state = serializers.ChoiceField(choices=LifeState.choices, required=False)
    resource_id = serializers.CharField(required=False, max_length=200)
    schedule_type = serializers.ChoiceField(choices=ScheduleType.choices, required=False)


class PlanAttemptOutputSerializer(serializers.ModelSerializer[PlanAttempt]):
    class Meta:
        model = PlanAttempt
        fields = ["number", "started_at", "status_code", "duration_ms", "error", "response_excerpt"]


class PlanOutputSerializer(serializers.ModelSerializer[Plan]):
    kind = serializers.ChoiceField(choices=PlanKind.choices, read_only=True)
    state = serializers.ChoiceField(choices=PlanState.choices, read_only=True)

    class Meta:
        model = Plan
        fields = ["kind", "time", "due_at", "state", "attempts_count", "webhook_id", "action"]


class PlanDetailOutputSerializer(PlanOutputSerializer):
    attempts = PlanAttemptOutputSerializer(many=True, read_only=True)

    class Meta(PlanOutputSerializer.Meta):
        fields = [*PlanOutputSerializer.Meta.fields, "attempts"]


class LifeOutputSerializer(serializers.ModelSerializer[Life]):
    owner = UserSerializer(read_only=True)
    state = serializers.ChoiceField(choices=LifeState.choices, read_only=True)
    plans = PlanOutputSerializer(many=True, read_only=True)

    class Meta:
        model = Life
        fields = [
            "life_uuid",
            "schedule_type",
            "resource_id",
            "state",
            "birth_time",
            "death_time",
            "birth_action",
            "death_action",
            "owner",
            "plans",
            "created_at",
            "updated_at",
        ]


class LifeDetailOutputSerializer(LifeOutputSerializer):
    plans = PlanDetailOutputSerializer(many=True, read_only=True)


class HeaderBookingOutputSerializer(serializers.Serializer[Any]):
    """The 202 of a request booked by `X-Schedule-Datetime` (any operation under /api/)."""

    life_uuid = serializers.CharField(help_text="The point Life that replays the request.")


class TaskInputSerializer(serializers.Serializer[Any]):
    topic = TopicField(max_length=100, help_text="A registered topic (see the enum).")
    content = serializers.DictField(required=False, default=dict)


class TaskOutputSerializer(serializers.Serializer[Any]):
    task_id = serializers.CharField()
    topic = serializers.CharField()
    state = serializers.ChoiceField(choices=TaskRun.State.choices)
