from __future__ import annotations

import json
from typing import Any

from django.core.validators import ProhibitNullCharactersValidator
from django.urls import reverse
from rest_framework import serializers

from apps.core.api.pagination import PageOutputSerializer
from apps.submissions.models import ResumableUpload, Submission, SubmissionFile, SubmissionStatus


class SubmissionFileOutputSerializer(serializers.ModelSerializer[SubmissionFile]):
    class Meta:
        model = SubmissionFile
        fields = ("filename", "size", "sha256", "uploaded_at")
        read_only_fields = fields


class SubmissionFileReadSerializer(serializers.ModelSerializer[SubmissionFile]):
    """A stored file in a listing: with its id and its download path."""

    download_url = serializers.SerializerMethodField()

    class Meta:
        model = SubmissionFile
        fields = ("id", "filename", "size", "sha256", "uploaded_at", "download_url")
        read_only_fields = fields

    def get_download_url(self, file: SubmissionFile) -> str:
        kwargs = {"submission_id": file.submission_id, "file_id": file.pk}
        return reverse("submission-file-download", kwargs=kwargs)


class SubmissionFileListOutputSerializer(serializers.Serializer[Any]):
    files = SubmissionFileReadSerializer(many=True)


class SubmissionOutputSerializer(serializers.ModelSerializer[Submission]):
    submission_id = serializers.CharField(source="id", read_only=True)
    user_id = serializers.IntegerField(source="owner_id", read_only=True)
    status = serializers.ChoiceField(choices=SubmissionStatus.choices, read_only=True)
    metadata = serializers.DictField(read_only=True)
    files = SubmissionFileOutputSerializer(many=True, read_only=True)

    class Meta:
        model = Submission
        fields = (
            "submission_id",
            "user_id",
            "status",
            "entrypoint",
            "config_file",
            "metadata",
            "question_id",
            "skill",
            "kind",
            "score",
            "created_at",
            "updated_at",
            "files",
        )
        read_only_fields = fields


class SubmissionPageOutputSerializer(PageOutputSerializer):
    results = SubmissionOutputSerializer(many=True)


class MetadataField(serializers.CharField):
    """JSON text that must decode to an object."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:  # type: ignore[override]
        text = super().to_internal_value(data)
        if not text.strip():
            return {}
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise serializers.ValidationError(f"Not valid JSON: {exc}.") from exc
        if not isinstance(value, dict):
            raise serializers.ValidationError("Must be a JSON object.")
        return value


class SubmissionCreateInputSerializer(serializers.Serializer[Any]):
    files = serializers.ListField(
        child=serializers.FileField(allow_empty_file=True, use_url=False),
        allow_empty=False,
        min_length=1,
        help_text="One or more files (the first file of a sequential upload, or all at once).",
    )
    entrypoint = serializers.CharField(max_length=255, default="main.py")
    config_file = serializers.CharField(max_length=255, default="config.yaml")
    metadata = MetadataField(
        required=False, allow_blank=True, help_text='JSON object as text, e.g. {"method": "padim"}.'
    )
    question_id = serializers.CharField(
        max_length=200, required=False, allow_blank=True, default=""
    )
    skill = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    challenge = serializers.CharField(
        max_length=50,
        required=False,
        allow_blank=True,
        default="",
        help_text="A challenge's slug: with `phase`, a submission to that phase.",
    )
    phase = serializers.CharField(
        max_length=50,
        required=False,
        allow_blank=True,
        default="",
        help_text="The phase's slug in `challenge`. A predictions phase needs no entrypoint "
        "or config file and takes the phase's file types.",
    )


class SubmissionFileAddInputSerializer(serializers.Serializer[Any]):
    file = serializers.FileField(allow_empty_file=True, use_url=False)


class UploadOutputSerializer(serializers.ModelSerializer[ResumableUpload]):
    """A resumable upload: `offset` counts the bytes durably stored."""

    upload_id = serializers.CharField(source="id", read_only=True)
    attached = serializers.SerializerMethodField()

    class Meta:
        model = ResumableUpload
        fields = (
            "upload_id",
            "offset",
            "length",
            "complete",
            "sha256",
            "created_at",
            "expires_at",
            "attached",
        )
        read_only_fields = fields

    def get_attached(self, upload: ResumableUpload) -> bool:
        return upload.attached_at is not None


class FilenameField(serializers.CharField):
    """A file's name as a field of the body: every rule about it is the name rule's, which the
    service applies (`invalid_filename`, as for a file part's name), so a NUL or another
    control character, a blank or an overlong name is refused with that code, never here as
    `invalid_request`."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        kwargs.setdefault("allow_blank", True)
        super().__init__(**kwargs)
        self.validators = [
            validator
            for validator in self.validators
            if not isinstance(validator, ProhibitNullCharactersValidator)
        ]


class SubmissionFileAttachInputSerializer(serializers.Serializer[Any]):
    """Attach a finished resumable upload as the file `filename`."""

    upload_id = serializers.RegexField(r"^[0-9a-f]{32}$", help_text="A finished upload of yours.")
    filename = FilenameField(help_text="The name the upload's file takes.")


class MetadataObjectField(MetadataField):
    """`metadata` as JSON text (a form) or as an object (a JSON body)."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:  # type: ignore[override]
        if isinstance(data, dict):
            return data
        return super().to_internal_value(data)


class SubmissionCreateFromUploadInputSerializer(SubmissionCreateInputSerializer):
    """Create a draft whose first file is a finished resumable upload (a form, or a JSON
    body without `files`)."""

    files = serializers.ListField(
        child=serializers.FileField(allow_empty_file=True, use_url=False),
        required=False,
        default=list,
        help_text="Files sent whole besides the upload (optional).",
    )
    # Blank is allowed (a predictions phase ignores both); a code submission refuses it.
    entrypoint = serializers.CharField(max_length=255, default="main.py", allow_blank=True)
    config_file = serializers.CharField(max_length=255, default="config.yaml", allow_blank=True)
    metadata = MetadataObjectField(
        required=False, allow_blank=True, help_text="A JSON object (as text in a form)."
    )
    upload_id = serializers.RegexField(r"^[0-9a-f]{32}$", help_text="A finished upload of yours.")
    filename = FilenameField(help_text="The name the upload's file takes.")
