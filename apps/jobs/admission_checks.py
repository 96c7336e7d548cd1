"""Admission checks other apps add to job submission, without this app importing them.

`POST /api/jobs/` runs, in the SPEC's order, completeness and in-flight dedup (the seal of the
draft), then every registered check for the submission's kind, then the user's rate, cost and
concurrency quotas (`apps.jobs.admission.job_admit`) — SPEC §11.4: a phase's checks come after
§3's completeness and in-flight checks and before the user's quotas.

A check runs inside the job's transaction, with the submission row locked (sealed: `pending`
until the transaction ends) and before any quota is counted. It may refuse with any
`DomainError` (the whole transaction rolls back: the submission stays a draft, no job, no key
bound) and may write rows of its own app, which commit with the job or not at all. It runs
only for a new job: an idempotent replay answers from the key before any check.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser


@dataclass(frozen=True)
class AdmissionCandidate:
    """The submission about to get a job: its owner, id and kind (`SubmissionKind`), and the
    moment the admission decides at."""

    user: AbstractBaseUser
    submission_id: str
    kind: str
    now: dt.datetime


AdmissionCheck = Callable[[AdmissionCandidate], None]

# name -> (kinds it applies to, check), in registration order.
_checks: dict[str, tuple[frozenset[str], AdmissionCheck]] = {}


def register_admission_check(
    name: str, *, kinds: Iterable[str]
) -> Callable[[AdmissionCheck], AdmissionCheck]:
    """Decorator: run the check for every new job of a submission whose kind is in `kinds`.
    Registering a name again replaces its check (in its first place)."""

    def register(check: AdmissionCheck) -> AdmissionCheck:
        _checks[name] = (frozenset(kinds), check)
        return check

    return register


def admission_checks_run(candidate: AdmissionCandidate) -> None:
    """Run the checks registered for the candidate's kind, in registration order; the first
    refusal propagates. Costs nothing (no query) when none applies."""
    for kinds, check in _checks.values():
        if candidate.kind in kinds:
            check(candidate)
