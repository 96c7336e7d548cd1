"""Input and output shapes of the challenges API (SPEC §11.1)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.benchmarks.models import (
    Challenge,
    Direction,
    ParticipantStatus,
    Participation,
    Phase,
    PhaseKind,
    Reveal,
    Visibility,
)


class UserOutputSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    username = serializers.CharField()


class MetricOutputSerializer(serializers.Serializer[Any]):
    key = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]
    direction = serializers.ChoiceField(choices=Direction.choices)
    precision = serializers.IntegerField()


class SplitOutputSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    hidden = serializers.BooleanField()


class LimitsOutputSerializer(serializers.Serializer[Any]):
    per_day = serializers.IntegerField(source="limit_per_day", allow_null=True)
    total = serializers.IntegerField(source="limit_total", allow_null=True)
    concurrent = serializers.IntegerField(source="limit_concurrent", allow_null=True)


class ResourcesOutputSerializer(serializers.Serializer[Any]):
    timeout = serializers.IntegerField(source="timeout_seconds", allow_null=True)
    memory_mb = serializers.IntegerField(allow_null=True)


class PhaseOutputSerializer(serializers.Serializer[Any]):
    """A phase as participants see it: never the reference data or the scoring program."""

    slug = serializers.CharField()
    title = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField(allow_null=True)
    kind = serializers.ChoiceField(choices=PhaseKind.choices)
    metrics = MetricOutputSerializer(many=True)
    primary = serializers.CharField(source="primary_metric")
    splits = SplitOutputSerializer(many=True)
    reveal = serializers.ChoiceField(choices=Reveal.choices)
    reveal_at = serializers.SerializerMethodField()
    revealed = serializers.SerializerMethodField()
    revealed_at = serializers.DateTimeField(allow_null=True)
    final_selection = serializers.IntegerField()
    file_types = serializers.ListField(child=serializers.CharField())
    limits = LimitsOutputSerializer(source="*")
    resources = ResourcesOutputSerializer(source="*")
    has_public_data = serializers.SerializerMethodField()

    def get_reveal_at(self, phase: Phase) -> str | None:
        """When hidden splits become visible: `reveal_at`, or the end for `reveal: end`."""
        moment = phase.reveal_at if phase.reveal == "time" else None
        if phase.reveal == "end":
            moment = phase.end
        return None if moment is None else serializers.DateTimeField().to_representation(moment)

    def get_revealed(self, phase: Phase) -> bool:
        """Whether the hidden splits are visible (`revealed_at` is when they became so)."""
        return phase.revealed_at is not None

    def get_has_public_data(self, phase: Phase) -> bool:
        return bool(phase.public_data)


class ChallengeOutputSerializer(serializers.Serializer[Any]):
    slug = serializers.CharField()
    title = serializers.CharField()
    description_html = serializers.CharField()
    visibility = serializers.ChoiceField(choices=Visibility.choices)
    participation = serializers.ChoiceField(choices=Participation.choices)
    max_team_size = serializers.IntegerField()
    bundle_version = serializers.IntegerField()
    bundle_sha256 = serializers.CharField()
    hosts = serializers.SerializerMethodField()
    phases = PhaseOutputSerializer(many=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_hosts(self, challenge: Challenge) -> list[dict[str, Any]]:
        return [{"id": h.user.pk, "username": h.user.get_username()} for h in challenge.hosts.all()]


class PlanOpOutputSerializer(serializers.Serializer[Any]):
    op = serializers.ChoiceField(choices=["create", "update", "delete", "unchanged"])
    path = serializers.CharField()
    from_ = serializers.JSONField(allow_null=True)
    to = serializers.JSONField(allow_null=True)

    def get_fields(self) -> dict[str, Any]:
        fields = super().get_fields()
        fields["from"] = fields.pop("from_")
        return fields


class DryRunOutputSerializer(serializers.Serializer[Any]):
    dry_run = serializers.BooleanField()
    slug = serializers.CharField()
    plan = PlanOpOutputSerializer(many=True)


class ChallengeApplyInputSerializer(serializers.Serializer[Any]):
    """Either form of the request: multipart `bundle` (+ `dry_run`), or JSON `upload_id`."""

    bundle = serializers.FileField(required=False, allow_empty_file=True)
    upload_id = serializers.CharField(required=False)
    dry_run = serializers.BooleanField(required=False, default=False)


class BundleMultipartSerializer(serializers.Serializer[Any]):
    """The schema of the multipart form."""

    bundle = serializers.FileField(help_text="The bundle: a .zip with challenge.yaml at its root.")
    dry_run = serializers.BooleanField(required=False, default=False)


class BundleUploadIdSerializer(serializers.Serializer[Any]):
    """The schema of the JSON form (a finished resumable upload)."""

    upload_id = serializers.CharField()
    dry_run = serializers.BooleanField(required=False, default=False)


class DryRunQuerySerializer(serializers.Serializer[Any]):
    dry_run = serializers.BooleanField(required=False, default=False)


class ParticipantOutputSerializer(serializers.Serializer[Any]):
    status = serializers.ChoiceField(choices=ParticipantStatus.choices)
    user = serializers.SerializerMethodField()

    def get_user(self, participant: Any) -> dict[str, Any]:
        return {"id": participant.user.pk, "username": participant.user.get_username()}
