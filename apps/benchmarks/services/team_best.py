"""Each team's best row (`TeamBest`) rebuilt from its scores, under the team's row lock.

Who writes a team's best rows, and in which order:

- a scoring result (`entry_scores_record`, or a rescored entry's
  `entry_item_scores_write` in kept SQL, in the result's transaction): locks the team row,
  then offers the new score (public split; every split when `final_selection` is 0) or
  rebuilds the hidden splits' rows (when the phase has finals);
- a final selected or unselected (`apps.benchmarks.services.finals`): locks the phase row, then
  the team row, then rebuilds the hidden splits' rows;
- a refund (an entry that stops counting) or a submission that leaves `completed`: the writer
  calls `team_best_refresh` in its transaction after its own write, which locks the team row
  and rebuilds every row of the team in the phase.

The team lock serializes every writer of one team's rows, so a rebuild never overwrites a
better row that another transaction wrote meanwhile (PostgreSQL's READ COMMITTED gives the
waiting transaction a fresh view of the committed scores; SQLite's write transactions
serialize anyway).

What a row means (SPEC §11.3): the public split's row is the team's best counted, completed
submission. A hidden split's row is the best hidden-split score among the team's finals; a
team with no (counted, completed) final is judged on its `final_selection` best submissions by
the public split in the same scoring version; with `final_selection: 0`, or a phase without a
public split, every counted, completed submission is considered.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db import transaction
from django.db.models import Q, QuerySet

from apps.benchmarks.models import Entry, Phase, Score, Split, Team, TeamBest
from apps.submissions.models import SubmissionStatus

PUBLIC = "public"


def phase_splits(phase: Phase) -> list[tuple[str, bool]]:
    """The phase's (split name, hidden) pairs."""
    return list(Split.objects.filter(phase=phase).order_by().values_list("name", "hidden"))


def team_lock(*, team_id: str) -> None:
    """Lock the team's row for the rest of the caller's transaction."""
    # No ordering: Team's default one would join the challenge for nothing.
    rows = Team.objects.select_for_update(of=("self",)).filter(pk=team_id).order_by()
    list(rows.values_list("pk"))


def eligible_entries(
    *, phase: Phase, team_id: str, including: str | None = None
) -> QuerySet[Entry]:
    """The team's counted, completed entries in the phase (and `including`, the entry whose
    result is being recorded in the caller's transaction, whatever its state so far)."""
    condition = Q(counted=True, submission__status=SubmissionStatus.COMPLETED)
    if including is not None:
        condition |= Q(pk=including)
    return Entry.objects.filter(condition, phase=phase, team_id=team_id)


def _candidates(
    *, phase: Phase, team_id: str, version: int, eligible: QuerySet[Entry], has_public: bool
) -> QuerySet[Entry] | list[str]:
    """The entries a hidden split's row is chosen from."""
    if phase.final_selection == 0 or not has_public:
        return eligible
    finals = list(eligible.filter(final=True).order_by().values_list("pk", flat=True))
    if finals:
        return finals
    by_public = Score.objects.filter(
        phase=phase, version=version, split=PUBLIC, team_id=team_id, entry__in=eligible
    ).order_by("order_key")
    return list(by_public.values_list("entry_id", flat=True)[: phase.final_selection])


def _store(*, phase: Phase, version: int, split: str, team_id: str, best: Score | None) -> None:
    where = {"phase": phase, "version": version, "split": split, "team_id": team_id}
    if best is None:
        TeamBest.objects.filter(**where).delete()
        return
    fields = {"score_id": best.pk, "metric_key": best.metric_key, "order_key": best.order_key}
    if not TeamBest.objects.filter(**where).update(**fields):
        TeamBest.objects.create(**where, **fields)


def team_best_rebuild(
    *,
    phase: Phase,
    team_id: str,
    versions: Iterable[int] | None = None,
    hidden_only: bool = False,
    including: str | None = None,
    splits: Sequence[tuple[str, bool]] | None = None,
) -> None:
    """Recompute the team's best rows in `versions` (default: every version the team has a
    score or a row in). The caller holds the team lock (`team_lock`) in its transaction.
    `splits`: the phase's (name, hidden) pairs when the caller has them (`phase_splits`)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("team_best_rebuild runs inside the transaction holding the team lock")
    if splits is None:
        splits = phase_splits(phase)
    has_public = any(name == PUBLIC for name, _ in splits)
    names = [name for name, hidden in splits if hidden or not hidden_only]
    if versions is None:
        seen = Score.objects.filter(phase=phase, team_id=team_id).values_list("version", flat=True)
        rows = TeamBest.objects.filter(phase=phase, team_id=team_id).values_list(
            "version", flat=True
        )
        versions = set(seen) | set(rows)
    eligible = eligible_entries(phase=phase, team_id=team_id, including=including)
    for version in sorted(versions):
        candidates = _candidates(
            phase=phase, team_id=team_id, version=version, eligible=eligible, has_public=has_public
        )
        for name in names:
            pool = candidates if name != PUBLIC else eligible
            best = (
                Score.objects.filter(
                    phase=phase, version=version, split=name, team_id=team_id, entry__in=pool
                )
                .order_by("order_key")
                .first()
            )
            _store(phase=phase, version=version, split=name, team_id=team_id, best=best)


def team_best_refresh(*, phase_id: str, team_id: str) -> None:
    """Rebuild every best row of the team in the phase: what a refund (or any change that
    makes an entry stop counting or leave `completed`) calls after its own write, inside its
    transaction (or alone: it opens one). Locks the team row. Idempotent."""
    with transaction.atomic():
        team_lock(team_id=team_id)
        phase = Phase.objects.get(pk=phase_id)
        team_best_rebuild(phase=phase, team_id=team_id)
