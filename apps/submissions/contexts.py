"""Where a submission is made: the registry through which a higher app (the benchmarks app)
tells the submissions app what a submission to one of its places is, without this app
importing it (SPEC §11.2).

`POST /api/submissions/` with `challenge` and `phase` asks the registered resolver, which
answers with a `SubmissionContext` (the kind and the accepted file types) or refuses with a
`DomainError` (404, 403 `not_participant`, 409 `phase_closed`). The context's `on_created`
runs inside the transaction that inserts the submission, so the resolver's app writes its own
rows (a phase entry, a team) together with the submission, or not at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from django.contrib.auth.models import AbstractBaseUser

from apps.core.exceptions import InvalidRequest, NotFound
from apps.submissions.models import Submission, SubmissionKind


def _nothing(submission: Submission) -> None:
    return None


@dataclass(frozen=True)
class SubmissionContext:
    """What a new submission is: its `kind`, the extensions its files may have (`file_types`;
    empty: `ALLOWED_UPLOAD_EXTENSIONS`), and `on_created(submission)`, called inside the
    insert's transaction (it may write its own app's rows, or raise to undo the insert)."""

    kind: SubmissionKind = SubmissionKind.PROGRAM
    file_types: tuple[str, ...] = ()
    on_created: Callable[[Submission], object] = field(default=_nothing)

    @property
    def needs_program(self) -> bool:
        """Whether an entrypoint and a config file are part of the submission (not for
        predictions: their files are what is scored)."""
        return self.kind != SubmissionKind.PREDICTIONS


PROGRAM = SubmissionContext()


class ContextResolver(Protocol):
    def __call__(
        self, *, user: AbstractBaseUser, challenge: str, phase: str
    ) -> SubmissionContext: ...


_resolvers: list[ContextResolver] = []


def register_context_resolver(resolver: ContextResolver) -> ContextResolver:
    """Register the resolver of `challenge`/`phase` submissions (one; registering again
    replaces it). Returns it, so it can be used as a decorator."""
    _resolvers[:] = [resolver]
    return resolver


def submission_context_resolve(
    *, user: AbstractBaseUser, challenge: str, phase: str, question_id: str, skill: str
) -> SubmissionContext:
    """The context of a new submission: `PROGRAM` when neither `challenge` nor `phase` is
    given, else the registered resolver's answer (its refusals propagate). InvalidRequest
    (`place_fields_check`) first; NotFound when no app resolves phases."""
    place_fields_check(challenge=challenge, phase=phase, question_id=question_id, skill=skill)
    if not challenge and not phase:
        return PROGRAM
    if not _resolvers:
        raise NotFound("No such challenge.")
    return _resolvers[0](user=user, challenge=challenge, phase=phase)


def place_fields_check(*, challenge: str, phase: str, question_id: str, skill: str) -> None:
    """InvalidRequest unless `challenge` and `phase` come together, and without a question or
    skill (a phase submission is ranked by its phase, never on the question leaderboard)."""
    if not challenge and not phase:
        return
    fields: dict[str, list[str]] = {}
    if not challenge:
        fields["challenge"] = ["Required with phase."]
    if not phase:
        fields["phase"] = ["Required with challenge."]
    for name, value in (("question_id", question_id), ("skill", skill)):
        if value:
            fields[name] = ["Not accepted with challenge and phase."]
    if fields:
        raise InvalidRequest("; ".join(f"{k}: {v[0]}" for k, v in fields.items()), fields=fields)
