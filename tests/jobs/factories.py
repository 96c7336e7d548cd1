"""Submissions and files made directly (the completeness check looks at rows, not storage)."""

from __future__ import annotations

from typing import Any, cast

import factory
from factory.declarations import LazyAttribute, SelfAttribute, Sequence, SubFactory

from apps.jobs.models import Job
from apps.submissions.models import Submission, SubmissionFile
from tests.factories import UserFactory


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


class JobFactory(factory.django.DjangoModelFactory[Job]):
    class Meta:
        model = Job

    owner = SubFactory(UserFactory)
    submission = SubFactory(SubmissionFactory, owner=SelfAttribute("..owner"))
    status = "queued"
    cost = 2


def make_submission(
    *, files: tuple[str, ...] = ("main.py", "config.yaml"), **fields: Any
) -> Submission:
    """A draft submission with the given files (default: the complete pair)."""
    submission = cast(Submission, SubmissionFactory(**fields))
    for name in files:
        SubmissionFileFactory(submission=submission, filename=name)
    return submission


def make_job(**fields: Any) -> Job:
    return cast(Job, JobFactory(**fields))
