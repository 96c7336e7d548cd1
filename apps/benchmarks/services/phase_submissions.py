"""Submissions to a phase (SPEC §11.2): who may make one, what it is, its entry and team, and
the phase's check when it is enqueued.

The submissions and jobs apps cannot import this app; `apps.benchmarks.registry` registers
these functions into their registries:

- `phase_submission_context` — the resolver of `POST /api/submissions/` with `challenge` and
  `phase` (`apps.submissions.contexts`): checks, in order, that the caller may see the
  challenge (404, as its detail), the phase exists (404), the caller is an approved
  participant (403 `not_participant`), and now is in `[start, end)` (409 `phase_closed`).
  Its `on_created` writes the `Entry` in the submission's own transaction, with the
  submitter's team (a team of one named after them when they have none).
- `phase_admission_check` — a check of `POST /api/jobs/` (`apps.jobs.admission_checks`):
  `phase_closed` outside `[start, end)`, then the team limits (`phase_limit_exceeded`,
  `apps.benchmarks.services.phase_limits`), else the entry becomes `counted`.
"""

from __future__ import annotations

import datetime as dt
import secrets
from functools import partial

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from apps.benchmarks.exceptions import NotParticipant, PhaseClosed
from apps.benchmarks.models import (
    Challenge,
    Entry,
    ParticipantStatus,
    Phase,
    PhaseKind,
    Team,
    TeamMember,
)
from apps.benchmarks.selectors import challenge_get_seen, participant_get
from apps.benchmarks.services.phase_count import phase_entry_count_if_under
from apps.benchmarks.services.phase_limits import phase_limits_admit
from apps.core.exceptions import NotFound
from apps.core.sql import SqlStatement
from apps.jobs.admission_checks import AdmissionCandidate
from apps.submissions.contexts import SubmissionContext
from apps.submissions.models import Submission, SubmissionKind, filename_fold

_KINDS = {PhaseKind.PREDICTIONS: SubmissionKind.PREDICTIONS, PhaseKind.CODE: SubmissionKind.CODE}
# Attempts at a team of one before a name with a random suffix: each failed attempt means
# another transaction committed that name (or the user's own team) in the meantime.
_NAME_ATTEMPTS = 20
_TEAM_NAME_MAX = Team._meta.get_field("name").max_length or 100


def phase_is_open(phase: Phase, now: dt.datetime) -> bool:
    """Whether the phase accepts submissions at `now`: `start <= now < end` (no end: open)."""
    return phase.start <= now and (phase.end is None or now < phase.end)


def phase_assert_open(phase: Phase, now: dt.datetime) -> None:
    """PhaseClosed (409) unless the phase accepts submissions at `now`, with its times."""
    if phase_is_open(phase, now):
        return
    when = "has not started yet" if now < phase.start else "has ended"
    raise PhaseClosed(
        f"Phase '{phase.slug}' {when}: it accepts submissions from {phase.start.isoformat()}"
        + (f" until {phase.end.isoformat()}." if phase.end is not None else "."),
        extra={
            "phase": phase.slug,
            "start": phase.start.isoformat(),
            "end": phase.end.isoformat() if phase.end is not None else None,
        },
    )


def phase_submission_context(
    *, user: AbstractBaseUser, challenge: str, phase: str
) -> SubmissionContext:
    """What a new submission to `challenge`/`phase` (slugs) is, or the first refusal:
    ChallengeNotFound (the caller may not see it: the challenge detail's 404), NotFound (no
    such phase), NotParticipant (no approved participation; a pending one is not one, and
    hosting is not taking part: a host takes part like anyone, approved at once), PhaseClosed
    (now outside `[start, end)`). Reads only; the returned `on_created` writes the entry."""
    found = challenge_get_seen(slug=challenge, user=user)
    phase_row = Phase.objects.filter(challenge=found, slug=phase).first()
    if phase_row is None:
        raise NotFound(f"Challenge '{found.slug}' has no phase '{phase}'.")
    participant = participant_get(challenge=found, user_id=int(user.pk))
    if participant is None or participant.status != ParticipantStatus.APPROVED:
        raise NotParticipant(
            f"You are not an approved participant of '{found.slug}'"
            + (
                " yet: a host has to approve you."
                if participant is not None
                else f": take part first (POST /api/challenges/{found.slug}/participate/)."
            ),
            extra={"status": participant.status if participant is not None else None},
        )
    phase_assert_open(phase_row, timezone.now())
    kind = _KINDS[PhaseKind(phase_row.kind)]
    file_types = (
        tuple(str(t) for t in phase_row.file_types) if kind == SubmissionKind.PREDICTIONS else ()
    )
    phase_row.challenge = found
    return SubmissionContext(
        kind=kind,
        file_types=file_types,
        on_created=partial(phase_entry_create, phase=phase_row, user=user),
    )


def phase_entry_create(submission: Submission, *, phase: Phase, user: AbstractBaseUser) -> Entry:
    """The phase's entry for a new submission, for the submitter's team (`team_for_submitter`).

    Runs inside the transaction that inserts the submission (`on_created`): both commit, or
    neither. The entry starts not counted; enqueueing counts it (`phase_admission_check`)."""
    team = team_for_submitter(challenge=phase.challenge, user=user)
    return Entry.objects.create(submission=submission, phase=phase, team=team, user_id=user.pk)


def team_for_submitter(*, challenge: Challenge, user: AbstractBaseUser) -> Team:
    """The user's team in the challenge; a user without one gets a team of one, named after
    them (their username, or the first free variant `name-2`, `name-3`, ... when a team of
    the challenge has that name, compared case-insensitively), with their membership.

    Must run inside a transaction. Concurrent first submissions of one user make one team:
    the unique (challenge, user) constraint on `TeamMember` decides; the loser's insert rolls
    back to its savepoint and it finds the winner's team. Idempotent."""
    conflict: IntegrityError | None = None
    for attempt in range(_NAME_ATTEMPTS + 1):
        member = (
            TeamMember.objects.select_related("team")
            .filter(challenge=challenge, user_id=user.pk)
            .first()
        )
        if member is not None:
            return member.team
        base = user.get_username()
        name = _free_team_name(challenge, base) if attempt < _NAME_ATTEMPTS else _random_name(base)
        try:
            with transaction.atomic():
                team = Team.objects.create(challenge=challenge, name=name)
                TeamMember.objects.create(team=team, challenge=challenge, user_id=user.pk)
        except IntegrityError as exc:
            conflict = exc
            continue
        return team
    raise conflict or IntegrityError("no team")  # pragma: no cover - 21 collisions


def _fit(base: str, suffix: str) -> str:
    return base[: _TEAM_NAME_MAX - len(suffix)] + suffix


def _free_team_name(challenge: Challenge, base: str) -> str:
    """`base`, else the first `base-n` (n ≥ 2) no team of the challenge has (folded)."""
    stem = filename_fold(base[: _TEAM_NAME_MAX - 8])
    taken = set(
        Team.objects.filter(challenge=challenge, name_folded__startswith=stem).values_list(
            "name_folded", flat=True
        )
    )
    candidate = _fit(base, "")
    number = 1
    while filename_fold(candidate) in taken:
        number += 1
        candidate = _fit(base, f"-{number}")
    return candidate


def _random_name(base: str) -> str:
    return _fit(base, f"-{secrets.token_hex(4)}")


# The entry's phase and whether it is open at the given moment (twice), the entry's team row
# locked (PostgreSQL): what an enqueue reads when the phase's one-round-trip check
# (`phase_entry_count_if_under`) did not count the entry.
_ENTRY_PHASE_SQL = (
    "SELECT p.{p.id}, p.{p.start} <= %s AND (p.{p.end} IS NULL OR %s < p.{p.end})"
    " FROM {e} e JOIN {p} p ON p.{p.id} = e.{e.phase} JOIN {t} t ON t.{t.id} = e.{e.team}"
    " WHERE e.{e.submission} = %s"
)
_ENTRY_PHASE = SqlStatement(_ENTRY_PHASE_SQL, e=Entry, p=Phase, t=Team)
_ENTRY_PHASE_LOCK = SqlStatement(_ENTRY_PHASE_SQL + " FOR UPDATE OF t", e=Entry, p=Phase, t=Team)


def phase_admission_check(candidate: AdmissionCandidate) -> None:
    """At enqueue (inside the job's transaction, the submission row locked): PhaseClosed
    unless the submission's phase accepts submissions now (also when the phase is gone: a
    bundle removed it); else the team limits (`phase_limits_admit`: PhaseLimitExceeded), and
    the entry becomes `counted`, in the job's transaction.

    The entry counts for the submitter's team at enqueue (a team of one when they have none
    now): a draft made in a team they left does not spend that team's limits. Locks that team's
    row FIRST (the user's quota row comes after, in the jobs admission); the membership is read
    again under the lock, since a leave may have committed in between.

    One round trip when the submitter is still in the entry's team and under its limits (the
    usual case): the entry's team row locked, then the entry counted by one conditional UPDATE
    whose subqueries check the phase's window, the membership and every limit
    (`phase_entry_count_if_under`). Otherwise, still under that lock, the entry's phase is read
    (gone or closed: PhaseClosed), and the general path below finds the current team (or makes
    a team of one), locks it, and admits or refuses."""
    user_id = int(candidate.user.pk)
    if phase_entry_count_if_under(
        entry_id=candidate.submission_id, user_id=user_id, now=candidate.now
    ):
        return
    locked = _ENTRY_PHASE_LOCK if connection.features.has_select_for_update else _ENTRY_PHASE
    now = connection.ops.adapt_datetimefield_value(candidate.now)
    row = locked.fetchone([now, now, candidate.submission_id])
    if row is None:
        raise PhaseClosed("The phase of this submission no longer exists.")
    phase_id, is_open = row
    if not is_open:
        phase_assert_open(Phase.objects.get(pk=phase_id), candidate.now)
    entry = Entry.objects.select_related("phase").get(pk=candidate.submission_id)
    challenge = Challenge.objects.get(pk=entry.phase.challenge_id)
    for _attempt in range(_NAME_ATTEMPTS):
        team = team_for_submitter(challenge=challenge, user=candidate.user)
        team_row = Team.objects.select_for_update(of=("self",)).filter(pk=team.pk).first()
        if (
            team_row is not None
            and TeamMember.objects.filter(team=team_row, user_id=user_id).exists()
        ):
            phase_limits_admit(entry=entry, team=team_row, now=candidate.now)
            return
    raise PhaseClosed("Your team changed while this submission was enqueued; try again.")
