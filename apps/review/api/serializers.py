from __future__ import annotations

from typing import Any

from django.core.validators import MaxLengthValidator, ProhibitNullCharactersValidator
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.api.serializers import UserSerializer
from apps.review.models import ReviewVerdict
from apps.review.services.review import MAX_COMMENT_LENGTH
from apps.submissions.models import SubmissionStatus


class QueueRowSerializer(serializers.Serializer[Any]):
    """A row of `review_queue`; the context's `reviewers` maps a claimer's id to the user."""

    id = serializers.CharField(source="pk")
    owner = UserSerializer()
    question_id = serializers.CharField()
    skill = serializers.CharField()
    score = serializers.FloatField(allow_null=True)
    created_at = serializers.DateTimeField()
    claimed_by = serializers.SerializerMethodField()
    claim_expires_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(UserSerializer(allow_null=True))
    def get_claimed_by(self, row: Any) -> dict[str, Any] | None:
        reviewer = self.context["reviewers"].get(row.claim_reviewer_id)
        return None if reviewer is None else dict(UserSerializer(reviewer).data)


class QueueQuerySerializer(serializers.Serializer[Any]):
    limit = serializers.IntegerField(min_value=1, max_value=500, default=100)


class ClaimOutputSerializer(serializers.Serializer[Any]):
    submission_id = serializers.CharField()
    claimed_by = UserSerializer()
    claim_expires_at = serializers.DateTimeField()


class ReleaseOutputSerializer(serializers.Serializer[Any]):
    submission_id = serializers.CharField()
    released = serializers.BooleanField(help_text="False when there was no claim to release.")


@extend_schema_field(serializers.ChoiceField(choices=ReviewVerdict.choices))
class VerdictField(serializers.Field):  # type: ignore[type-arg]
    """Any value but null, as text (`"True"` for true): whether it names a verdict is the
    service's rule (`review_complete`), which the schema states."""

    def to_internal_value(self, data: Any) -> str:
        return str(data)

    def to_representation(self, value: Any) -> str:
        return str(value)


class CommentField(serializers.CharField):
    """Text, trimmed. Its validators state the service's rules in the schema (at most
    `max_length` characters, no NUL); parsing runs only the others: `review_complete` enforces
    those two."""

    _SERVICE_RULES = (MaxLengthValidator, ProhibitNullCharactersValidator)

    def run_validators(self, value: Any) -> None:
        stated = self.validators
        self.validators = [v for v in stated if not isinstance(v, self._SERVICE_RULES)]
        try:
            super().run_validators(value)
        finally:
            self.validators = stated


# The shapes of a verdict's body; `review_complete` checks the values.
class CompleteInputSerializer(serializers.Serializer[Any]):
    verdict = VerdictField()
    score = serializers.FloatField(required=False, allow_null=True, default=None)
    comment = CommentField(
        required=False, allow_blank=True, default="", max_length=MAX_COMMENT_LENGTH
    )


class ReviewRecordSerializer(serializers.Serializer[Any]):
    id = serializers.CharField()
    verdict = serializers.ChoiceField(choices=ReviewVerdict.choices)
    score = serializers.FloatField(allow_null=True)
    comment = serializers.CharField()
    reviewer = UserSerializer()
    created_at = serializers.DateTimeField()


class CompleteOutputSerializer(serializers.Serializer[Any]):
    """A `ReviewRecord` with the submission it judged."""

    submission_id = serializers.CharField(source="submission.pk")
    status = serializers.ChoiceField(source="submission.status", choices=SubmissionStatus.choices)
    score = serializers.FloatField(source="submission.score", allow_null=True)
    review = ReviewRecordSerializer(source="*")


class RegradeOutputSerializer(serializers.Serializer[Any]):
    """A regrade's result: the submission back in `pending` and its new job."""

    submission_id = serializers.CharField(source="submission.pk")
    status = serializers.ChoiceField(source="submission.status", choices=SubmissionStatus.choices)
    job_id = serializers.CharField(source="job.pk")


class LeaderboardQuerySerializer(serializers.Serializer[Any]):
    question_id = serializers.CharField(required=False, allow_blank=True, max_length=200)
    skill = serializers.CharField(required=False, allow_blank=True, max_length=200)
    limit = serializers.IntegerField(min_value=1, max_value=1000, default=100)


class LeaderboardRowSerializer(serializers.Serializer[Any]):
    rank = serializers.IntegerField()
    user = UserSerializer()
    score = serializers.FloatField()
    submission_id = serializers.CharField()
    completed_at = serializers.DateTimeField()


class ArchiveMemberSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(help_text="The member's path inside the archive.")
    size = serializers.IntegerField(help_text="Bytes once unpacked (0 for a folder).")
    type = serializers.CharField(source="kind", help_text="`file` or `folder`.")


class LeaderboardQuestionsQuerySerializer(serializers.Serializer[Any]):
    limit = serializers.IntegerField(min_value=1, max_value=1000, default=1000)


class LeaderboardQuestionSerializer(serializers.Serializer[Any]):
    question_id = serializers.CharField(
        allow_blank=True, help_text="The question id (empty: submissions sent without one)."
    )
    skills = serializers.ListField(
        child=serializers.CharField(allow_blank=True), help_text="Skills ranked under it."
    )
    users = serializers.IntegerField(help_text="Users with a completed, scored submission.")
    best_score = serializers.FloatField()


class ReviewFileSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    filename = serializers.CharField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()
    text = serializers.CharField(
        allow_null=True, help_text="The content of a small text file (≤ 64 KiB), else null."
    )
    members = serializers.SerializerMethodField(
        help_text="An archive's members (name, size, type), in archive order; null for a file "
        "that is no archive, or when the archive cannot be listed (see `members_problem`)."
    )
    members_problem = serializers.SerializerMethodField(
        help_text="Why an archive's members are not listed, else empty."
    )
    download_url = serializers.SerializerMethodField(
        help_text="The review API's download path of this file."
    )

    @extend_schema_field(ArchiveMemberSerializer(many=True, allow_null=True))
    def get_members(self, file: Any) -> list[dict[str, Any]] | None:
        if file.members is None or file.members.members is None:
            return None
        return [dict(ArchiveMemberSerializer(m).data) for m in file.members.members]

    def get_members_problem(self, file: Any) -> str:
        return "" if file.members is None else str(file.members.problem)

    def get_download_url(self, file: Any) -> str:
        kwargs = {"submission_id": self.context["submission_id"], "file_id": file.id}
        return reverse("review-file-download", kwargs=kwargs)


class GradingAttemptSerializer(serializers.Serializer[Any]):
    number = serializers.IntegerField()
    outcome = serializers.CharField()
    exit_code = serializers.IntegerField(allow_null=True)
    score = serializers.FloatField(allow_null=True)
    reason = serializers.CharField(allow_blank=True)
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class ReviewDetailSerializer(serializers.Serializer[Any]):
    """`GET /api/review/submissions/{id}/`: what a reviewer reads before a verdict."""

    id = serializers.CharField(source="submission.pk")
    owner = UserSerializer(source="submission.owner")
    status = serializers.CharField(source="submission.status")
    status_reason = serializers.CharField(source="submission.status_reason", allow_blank=True)
    score = serializers.FloatField(source="submission.score", allow_null=True)
    question_id = serializers.CharField(source="submission.question_id")
    skill = serializers.CharField(source="submission.skill")
    entrypoint = serializers.CharField(source="submission.entrypoint")
    config_file = serializers.CharField(source="submission.config_file")
    files = ReviewFileSerializer(many=True)
    logs = serializers.SerializerMethodField(help_text="The grader's output (latest job).")
    error = serializers.SerializerMethodField()
    attempts = GradingAttemptSerializer(many=True)

    def get_logs(self, detail: Any) -> str:
        return str(detail.job.logs) if detail.job is not None else ""

    def get_error(self, detail: Any) -> str:
        return str(detail.job.error) if detail.job is not None else ""
