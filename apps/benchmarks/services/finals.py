"""Finals: the submissions a team picks for the hidden splits (SPEC §11.3).

A final is a counted, completed submission of the caller's team in a phase; a team holds at
most `final_selection` of them; after the phase's reveal they no longer change.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from apps.benchmarks.exceptions import FinalsFrozen, TooManyFinals
from apps.benchmarks.models import Entry, Phase, TeamMember
from apps.benchmarks.services.team_best import eligible_entries, team_best_rebuild, team_lock
from apps.core.exceptions import NotFound, PermissionDenied
from apps.submissions.models import Submission


@dataclass(frozen=True)
class FinalsResult:
    submission_id: str
    final: bool
    finals: list[str]
    final_selection: int


def _refused() -> PermissionDenied:
    return PermissionDenied("Only a counted, completed submission of your team can be a final.")


def final_set(*, user: AbstractBaseUser, submission_id: str, final: bool) -> FinalsResult:
    """Select (`final=True`) or unselect a final. Idempotent: selecting a final again, or
    unselecting a submission that is not one, changes nothing and answers the same.

    Lock order: the phase row, then the team row (the phase lock makes the reveal's UPDATE
    wait for a selection in flight, so none lands after `revealed_at` is set; the team lock
    makes the count of finals and the insert one step under any number of concurrent
    requests). Raises NotFound (no such submission), PermissionDenied (not a counted,
    completed submission of the caller's team in a phase), FinalsFrozen (the phase is
    revealed), TooManyFinals (`final_selection` reached; `final_selection: 0` allows none).
    """
    entry = Entry.objects.filter(pk=submission_id).only("pk", "phase_id", "team_id").first()
    if entry is None:
        if Submission.objects.filter(pk=submission_id).exists():
            raise _refused()
        raise NotFound("No such submission.")
    if not TeamMember.objects.filter(team_id=entry.team_id, user_id=user.pk).exists():
        raise _refused()
    with transaction.atomic():
        phase = Phase.objects.select_for_update(of=("self",)).get(pk=entry.phase_id)
        team_lock(team_id=entry.team_id)
        eligible = eligible_entries(phase=phase, team_id=entry.team_id)
        current = eligible.filter(pk=entry.pk).values_list("final", flat=True).first()
        if current is None:
            raise _refused()
        if phase.revealed_at is not None:
            raise FinalsFrozen()
        if final and not current:
            selected = eligible.filter(final=True).count()
            if selected >= phase.final_selection:
                raise TooManyFinals(extra={"allowed": phase.final_selection, "selected": selected})
        if final != current:
            Entry.objects.filter(pk=entry.pk).update(final=final)
            team_best_rebuild(phase=phase, team_id=entry.team_id, hidden_only=True)
        finals = list(
            eligible.filter(final=True).order_by("created_at").values_list("pk", flat=True)
        )
    return FinalsResult(
        submission_id=entry.pk,
        final=final,
        finals=finals,
        final_selection=phase.final_selection,
    )
