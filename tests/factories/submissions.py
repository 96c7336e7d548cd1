"""Submissions and their files: rows only (`make_submission`), or with the bytes in storage
(`make_stored_submission`, `add_file`), and archive builders."""

from __future__ import annotations

import hashlib
import io
import tarfile
import textwrap
import zipfile
from typing import Any, cast

import factory
from django.contrib.auth.models import User
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils import timezone
from factory.declarations import LazyAttribute, Sequence, SubFactory

from apps.submissions.models import Submission, SubmissionFile, SubmissionStatus
from tests.factories.users import UserFactory


class SubmissionFactory(factory.django.DjangoModelFactory[Submission]):
    class Meta:
        model = Submission

    owner = SubFactory(UserFactory)
    status = "draft"


class SubmissionFileFactory(factory.django.DjangoModelFactory[SubmissionFile]):
    class Meta:
        model = SubmissionFile

    submission = SubFactory(SubmissionFactory)
    filename = Sequence(lambda n: f"file{n}.py")
    size = 10
    sha256 = "0" * 64
    storage_name = LazyAttribute(lambda f: f"submissions/{f.submission.pk}/{f.filename}")


def make_submission(
    *, files: tuple[str, ...] = ("main.py", "config.yaml"), **fields: Any
) -> Submission:
    """A draft submission with rows for the given files (default: the complete pair); nothing
    is stored (the completeness check looks at rows, not storage)."""
    submission = cast(Submission, SubmissionFactory(**fields))
    for name in files:
        SubmissionFileFactory(submission=submission, filename=name)
    return submission


def add_file(submission: Submission, filename: str, content: bytes) -> SubmissionFile:
    """Store `content` at `submissions/<id>/<filename>` and record the SubmissionFile row."""
    name = default_storage.save(f"submissions/{submission.pk}/{filename}", ContentFile(content))
    return cast(
        SubmissionFile,
        SubmissionFileFactory(
            submission=submission,
            filename=filename,
            size=len(content),
            sha256=hashlib.sha256(content).hexdigest(),
            storage_name=name,
        ),
    )


def make_stored_submission(
    owner: User,
    *,
    status: str = SubmissionStatus.PENDING,
    program: str | None = None,
    config: bytes = b"answer: 42\n",
    extra_files: dict[str, bytes] | None = None,
    **fields: Any,
) -> Submission:
    """A submission (`pending` by default) with `main.py` (when `program` is given) and
    `config.yaml` in storage, ready for a grader."""
    submission = Submission.objects.create(owner=owner, status=status, **fields)
    if program is not None:
        add_file(submission, submission.entrypoint, textwrap.dedent(program).encode())
        add_file(submission, submission.config_file, config)
    for filename, content in (extra_files or {}).items():
        add_file(submission, filename, content)
    return submission


def make_graded_submission(
    owner: User, *, score: float | None, status: str = SubmissionStatus.COMPLETED, **fields: Any
) -> Submission:
    """A submission whose grading ended with `score` (completed now unless told otherwise)."""
    if status == SubmissionStatus.COMPLETED:
        fields.setdefault("completed_at", timezone.now())
    return Submission.objects.create(owner=owner, status=status, score=score, **fields)


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
