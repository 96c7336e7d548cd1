"""Jobs made directly, with their submission (and owner) when none is given."""

from __future__ import annotations

from typing import Any, cast

import factory
from factory.declarations import LazyFunction, SelfAttribute, SubFactory

from apps.jobs.models import Job
from apps.submissions.models import Submission
from tests.factories.submissions import SubmissionFactory
from tests.factories.users import UserFactory


class JobFactory(factory.django.DjangoModelFactory[Job]):
    class Meta:
        model = Job

    owner = SubFactory(UserFactory)
    submission = SubFactory(SubmissionFactory, owner=SelfAttribute("..owner"))
    status = "queued"
    cost = 2
    config = LazyFunction(dict)


def make_job(submission: Submission | None = None, /, **fields: Any) -> Job:
    """A job (`queued` unless told otherwise) for `submission` and its owner, or for a new
    submission of `owner`."""
    if submission is not None:
        fields.update(submission=submission, owner=submission.owner)
    return cast(Job, JobFactory(**fields))
