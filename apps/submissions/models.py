"""Submissions: a user's set of files for one question, graded by a job."""

from __future__ import annotations

import unicodedata
from typing import Any

from django.conf import settings
from django.db import models

from apps.core.models_utils import new_hex_id
from apps.core.transitions import TransitionTable


class SubmissionStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    PENDING = "pending", "Pending"
    PROCESSING = "processing", "Processing"
    COMPLETED = "completed", "Completed"
    REVIEW_PENDING = "review_pending", "Review pending"
    FAILED = "failed", "Failed"


_S = SubmissionStatus

# The whole submission lifecycle (SPEC §5). Every status change goes through this table.
SUBMISSION_TRANSITIONS: TransitionTable[str] = TransitionTable(
    "Submission",
    {
        _S.DRAFT: frozenset({_S.PENDING}),
        _S.PENDING: frozenset({_S.PROCESSING, _S.FAILED}),
        _S.PROCESSING: frozenset({_S.COMPLETED, _S.REVIEW_PENDING, _S.FAILED}),
        _S.REVIEW_PENDING: frozenset({_S.COMPLETED, _S.FAILED}),
        # Only by an explicit regrade (admin action or staff API).
        _S.COMPLETED: frozenset({_S.PENDING}),
        _S.FAILED: frozenset({_S.PENDING}),
    },
)

IN_FLIGHT_STATUSES = (SubmissionStatus.PENDING, SubmissionStatus.PROCESSING)


class SubmissionKind(models.TextChoices):
    """What a submission is: a program graded by its own `metrics.json` (SPEC §4-§5), or a
    submission to a challenge's phase (§11.2), whose scores the benchmarks app keeps."""

    PROGRAM = "program", "Program"
    PREDICTIONS = "predictions", "Predictions"
    CODE = "code", "Code"


class Submission(models.Model):
    id = models.CharField(primary_key=True, max_length=32, default=new_hex_id, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="submissions"
    )
    status = models.CharField(
        max_length=20, choices=SubmissionStatus.choices, default=SubmissionStatus.DRAFT
    )
    entrypoint = models.CharField(max_length=255, default="main.py")
    config_file = models.CharField(max_length=255, default="config.yaml")
    metadata = models.JSONField(default=dict, blank=True)
    question_id = models.CharField(max_length=200, blank=True, default="")
    skill = models.CharField(max_length=200, blank=True, default="")
    kind = models.CharField(
        max_length=12, choices=SubmissionKind.choices, default=SubmissionKind.PROGRAM
    )
    # The extensions its files may have ("" suffixes as `ALLOWED_UPLOAD_EXTENSIONS` spells
    # them); empty means `ALLOWED_UPLOAD_EXTENSIONS`. Fixed at creation (a phase's file types).
    file_types = models.JSONField(default=list, blank=True)

    # Grading outcome.
    score = models.FloatField(null=True, blank=True)
    status_reason = models.TextField(blank=True, default="")
    completed_at = models.DateTimeField(null=True, blank=True)

    # Processing lease of the grading worker that holds it (SPEC §5).
    lease_token = models.CharField(max_length=32, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # Natural dedup of in-flight work (seed 003): one pending/processing submission per
            # (owner, question_id, skill) when a question is named.
            models.UniqueConstraint(
                fields=["owner", "question_id", "skill"],
                condition=models.Q(status__in=["pending", "processing"])
                & ~models.Q(question_id=""),
                name="submissions_submission_one_in_flight",
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=SubmissionStatus.values),
                name="submissions_submission_status_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(kind__in=SubmissionKind.values),
                name="submissions_submission_kind_valid",
            ),
            # A phase submission's scores are the benchmarks app's (hidden splits included):
            # it never carries the question/skill score the §5 leaderboard ranks.
            models.CheckConstraint(
                condition=models.Q(kind=SubmissionKind.PROGRAM) | models.Q(score__isnull=True),
                name="submissions_submission_phase_no_score",
            ),
        ]
        indexes = [
            models.Index(fields=["owner", "status"], name="submissions_owner_status"),
            models.Index(
                fields=["question_id", "skill", "status", "score"],
                name="submissions_leaderboard",
            ),
            # The review queue's length and oldest entry, read at every metrics scrape
            # (`updated_at` is when the submission entered review_pending).
            models.Index(
                fields=["updated_at"],
                name="submissions_review_pending",
                condition=models.Q(status="review_pending"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"


def filename_fold(name: str) -> str:
    """The one case-folding rule for file names (`name_folded`): Unicode canonical caseless
    matching, `NFC(casefold(NFD(name)))`, computed in Python so SQLite and PostgreSQL agree
    (SQLite's `LOWER()` folds ASCII only). `É.py` = `é.py` (also when one is sent decomposed,
    `E` + U+0301), `STRASSE.py` = `straße.py`."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", name).casefold())


class SubmissionFile(models.Model):
    """One uploaded file. Names are unique per submission, compared by `filename_fold`: the
    unique constraint is on `name_folded`, which `save()` derives from `filename`."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="files")
    filename = models.CharField(max_length=255)
    # filename_fold(filename); case folding can lengthen a name (ß → ss), hence the room.
    name_folded = models.CharField(max_length=1024, editable=False)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    storage_name = models.CharField(max_length=1024)
    uploaded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["uploaded_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["submission", "name_folded"],
                name="submissions_submissionfile_unique_name_folded",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.submission_id}/{self.filename}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.name_folded = filename_fold(self.filename)
        super().save(*args, **kwargs)


class ResumableUpload(models.Model):
    """A file arriving over several requests (SPEC §11.5), in either resumable protocol.

    `offset` counts the bytes durably stored (written and fsynced before the row said so);
    `sha256_state` is the digest state after exactly those bytes, so a resumed upload goes on
    hashing without reading stored bytes again. `writer` and `writer_until` are the append
    claim: one request at a time appends, and a claim whose writer died lapses.
    """

    id = models.CharField(primary_key=True, max_length=32, default=new_hex_id, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="resumable_uploads"
    )
    # None until the client states it (the draft protocol may learn it only at the end).
    length = models.PositiveBigIntegerField(null=True, blank=True)
    offset = models.PositiveBigIntegerField(default=0)
    sha256_state = models.BinaryField(max_length=256)
    # The final digest, once complete.
    sha256 = models.CharField(max_length=64, blank=True, default="")
    complete = models.BooleanField(default=False)
    storage_key = models.CharField(max_length=1024)
    # tus `Upload-Metadata`, decoded (e.g. {"filename": "..."}): informational only.
    metadata = models.JSONField(default=dict, blank=True)
    writer = models.CharField(max_length=32, blank=True, default="")
    writer_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_byte_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    # Set once the bytes became a submission file or a bundle: they stop counting as an upload.
    attached_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(length__isnull=True) | models.Q(offset__lte=models.F("length")),
                name="submissions_resumableupload_offset_within_length",
            ),
        ]
        indexes = [
            models.Index(fields=["owner", "attached_at"], name="submissions_upload_owner"),
            models.Index(fields=["expires_at"], name="submissions_upload_expires"),
        ]

    def __str__(self) -> str:
        return f"upload {self.pk} ({self.offset}/{self.length if self.length is not None else '?'})"
