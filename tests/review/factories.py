"""Submissions, files and jobs for grading and review tests, created directly."""

from __future__ import annotations

import hashlib
import io
import tarfile
import textwrap
import zipfile
from typing import Any

from django.contrib.auth.models import User
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from apps.jobs.models import Job, JobStatus
from apps.submissions.models import Submission, SubmissionFile, SubmissionStatus


def add_file(submission: Submission, filename: str, content: bytes) -> SubmissionFile:
    """Store `content` at `submissions/<id>/<filename>` and record the SubmissionFile row."""
    name = default_storage.save(f"submissions/{submission.pk}/{filename}", ContentFile(content))
    return SubmissionFile.objects.create(
        submission=submission,
        filename=filename,
        size=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        storage_name=name,
    )


def make_submission(
    owner: User,
    *,
    status: str = SubmissionStatus.PENDING,
    program: str | None = None,
    config: bytes = b"answer: 42\n",
    extra_files: dict[str, bytes] | None = None,
    **fields: Any,
) -> Submission:
    """A submission with `main.py` (when `program` is given) and `config.yaml` in storage."""
    submission = Submission.objects.create(owner=owner, status=status, **fields)
    if program is not None:
        add_file(submission, submission.entrypoint, textwrap.dedent(program).encode())
        add_file(submission, submission.config_file, config)
    for filename, content in (extra_files or {}).items():
        add_file(submission, filename, content)
    return submission


def make_job(
    submission: Submission, *, status: str = JobStatus.QUEUED, config: dict[str, Any] | None = None
) -> Job:
    return Job.objects.create(
        owner=submission.owner, submission=submission, status=status, config=config or {}
    )


def make_graded_submission(
    owner: User, *, score: float | None, status: str = SubmissionStatus.COMPLETED, **fields: Any
) -> Submission:
    from django.utils import timezone

    submission = Submission.objects.create(owner=owner, status=status, score=score, **fields)
    if status == SubmissionStatus.COMPLETED and "completed_at" not in fields:
        submission.completed_at = timezone.now()
        submission.save(update_fields=["completed_at"])
    return submission


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def tar_gz_bytes(members: dict[str, bytes], *, symlink: tuple[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        if symlink is not None:
            info = tarfile.TarInfo(symlink[0])
            info.type = tarfile.SYMTYPE
            info.linkname = symlink[1]
            tf.addfile(info)
    return buffer.getvalue()
