"""Input and output shapes of leaderboards, finals and the hosts' list of a phase's
submissions."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.benchmarks.api.serializers import MetricOutputSerializer, UserOutputSerializer
from apps.benchmarks.board_cursor import CURSOR_MAX_LENGTH
from apps.core.api.pagination import MAX_OFFSET, PageOutputSerializer, PageQuerySerializer
from apps.submissions.models import SubmissionStatus

#: Rows of a leaderboard page: the default and the most one JSON page holds (a CSV export
#: streams every row unless `limit` is given).
BOARD_DEFAULT_LIMIT = 100
BOARD_MAX_LIMIT = 1000

_SCORES_SCHEMA = {"type": "object", "additionalProperties": {"type": "number"}}


@extend_schema_field(_SCORES_SCHEMA)
class ScoresField(serializers.DictField):
    pass


@extend_schema_field({"type": "object", "additionalProperties": _SCORES_SCHEMA})
class SplitScoresField(serializers.DictField):
    pass


class BoardQuerySerializer(serializers.Serializer[Any]):
    split = serializers.RegexField(
        r"^[A-Za-z0-9_.-]{1,50}$", required=False, default="public", help_text="A split name."
    )
    scoring_version = serializers.IntegerField(
        required=False, min_value=1, max_value=2**31 - 1, help_text="An earlier version."
    )
    limit = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=BOARD_MAX_LIMIT,
        default=BOARD_DEFAULT_LIMIT,
        help_text="Rows per page (JSON; a CSV export streams every row unless given).",
    )
    offset = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_OFFSET, default=0, help_text="Rows to skip."
    )
    format = serializers.ChoiceField(
        choices=["json", "csv"], required=False, help_text="`csv`, or send `Accept: text/csv`."
    )
    cursor = serializers.CharField(
        required=False,
        max_length=CURSOR_MAX_LENGTH,
        help_text="The `next` of the page before (JSON only; instead of `offset`).",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "cursor" in attrs and "offset" in self.initial_data:
            raise serializers.ValidationError({"offset": ["Give a cursor or an offset, not both."]})
        if "cursor" in attrs and attrs.get("format") == "csv":
            raise serializers.ValidationError({"cursor": ["A CSV export takes no cursor."]})
        return attrs


class TeamRefSerializer(serializers.Serializer[Any]):
    id = serializers.CharField()
    name = serializers.CharField()


class BoardRowSerializer(serializers.Serializer[Any]):
    rank = serializers.IntegerField(allow_null=True)
    team = TeamRefSerializer(allow_null=True)
    scores = ScoresField()
    submission_id = serializers.CharField(allow_null=True)
    submitted_at = serializers.DateTimeField(allow_null=True)
    baseline = serializers.BooleanField()


class BoardOutputSerializer(serializers.Serializer[Any]):
    challenge = serializers.CharField()
    phase = serializers.CharField()
    split = serializers.CharField()
    scoring_version = serializers.IntegerField()
    revealed = serializers.BooleanField()
    columns = MetricOutputSerializer(many=True)
    rows = BoardRowSerializer(many=True)
    count = serializers.IntegerField(help_text="Rows of the whole leaderboard (with baselines).")
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    next = serializers.CharField(
        allow_null=True, help_text="The next page's cursor (`?cursor=`), null on the last page."
    )


class FinalOutputSerializer(serializers.Serializer[Any]):
    submission_id = serializers.CharField()
    final = serializers.BooleanField()
    finals = serializers.ListField(child=serializers.CharField())
    final_selection = serializers.IntegerField()


class HostEntriesQuerySerializer(PageQuerySerializer):
    scoring_version = serializers.IntegerField(
        required=False, min_value=1, max_value=2**31 - 1, help_text="Scores of this version."
    )


class HostEntrySerializer(serializers.Serializer[Any]):
    submission_id = serializers.CharField(source="entry.submission_id")
    status = serializers.ChoiceField(
        source="entry.submission.status", choices=SubmissionStatus.choices
    )
    status_reason = serializers.CharField(source="entry.submission.status_reason")
    team = TeamRefSerializer(source="entry.team")
    user = UserOutputSerializer(source="entry.user")
    created_at = serializers.DateTimeField(source="entry.submission.created_at")
    completed_at = serializers.DateTimeField(
        source="entry.submission.completed_at", allow_null=True
    )
    counted = serializers.BooleanField(source="entry.counted")
    refund_reason = serializers.CharField(source="entry.refund_reason")
    failure = serializers.CharField(source="entry.failure")
    final = serializers.BooleanField(source="entry.final")
    logs = serializers.CharField(
        help_text="The run's log (the job's), as the participant reads it."
    )
    scoring_logs = serializers.CharField(source="entry.scoring_logs")
    scores = SplitScoresField(help_text="Every split's scores in the version asked.")


class HostEntryPageSerializer(PageOutputSerializer):
    scoring_version = serializers.IntegerField()
    results = HostEntrySerializer(many=True)
