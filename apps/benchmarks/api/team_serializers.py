"""Serializers of teams, grants and a team's view of a phase (SPEC §11.4)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.benchmarks.api.board_serializers import SplitScoresField, TeamRefSerializer
from apps.benchmarks.api.serializers import UserOutputSerializer
from apps.benchmarks.models import GrantLimit
from apps.submissions.models import SubmissionStatus

_NAME_MAX = 100


class TeamCreateInputSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(max_length=_NAME_MAX)


class TeamJoinInputSerializer(serializers.Serializer[Any]):
    invite_code = serializers.CharField(max_length=32)


class MemberSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField(source="user.id")
    username = serializers.CharField(source="user.username")


class TeamOutputSerializer(serializers.Serializer[Any]):
    id = serializers.CharField(source="team.id")
    name = serializers.CharField(source="team.name")
    members = MemberSerializer(many=True)
    invite_code = serializers.CharField(
        source="team.invite_code", help_text="A secret: only the team's members see it."
    )


class GrantInputSerializer(serializers.Serializer[Any]):
    phase = serializers.SlugField(max_length=50)
    limit = serializers.ChoiceField(choices=GrantLimit.choices)
    extra = serializers.IntegerField(min_value=1, max_value=1_000_000)
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class GrantOutputSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    team = TeamRefSerializer()
    phase = serializers.CharField(source="phase.slug")
    limit = serializers.ChoiceField(choices=GrantLimit.choices)
    extra = serializers.IntegerField()
    day = serializers.DateField(
        allow_null=True, help_text="The UTC day a per_day grant holds for (null: total)."
    )
    reason = serializers.CharField()
    granted_by = UserOutputSerializer(allow_null=True)
    created_at = serializers.DateTimeField()


class LimitUseSerializer(serializers.Serializer[Any]):
    allowed = serializers.IntegerField(allow_null=True, help_text="null: no limit.")
    used = serializers.IntegerField()
    remaining = serializers.IntegerField(allow_null=True)
    resets_at = serializers.DateTimeField(allow_null=True)


class LimitsSerializer(serializers.Serializer[Any]):
    per_day = LimitUseSerializer()
    total = LimitUseSerializer()
    concurrent = LimitUseSerializer()


class TeamEntrySerializer(serializers.Serializer[Any]):
    submission_id = serializers.CharField(source="entry.submission_id")
    status = serializers.ChoiceField(
        source="entry.submission.status", choices=SubmissionStatus.choices
    )
    status_reason = serializers.CharField(source="entry.submission.status_reason")
    user = UserOutputSerializer(source="entry.user")
    created_at = serializers.DateTimeField(source="entry.submission.created_at")
    counted = serializers.BooleanField(source="entry.counted")
    refund_reason = serializers.CharField(source="entry.refund_reason")
    final = serializers.BooleanField(source="entry.final")
    scores = SplitScoresField(help_text="The splits the caller may see (hidden: after reveal).")


class PhaseMineSerializer(serializers.Serializer[Any]):
    challenge = serializers.CharField(source="phase.challenge.slug")
    phase = serializers.CharField(source="phase.slug")
    team = TeamRefSerializer()
    limits = LimitsSerializer()
    submissions = TeamEntrySerializer(many=True)
