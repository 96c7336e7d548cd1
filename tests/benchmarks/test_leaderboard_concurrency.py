"""Races on a team's best rows and finals (real threads; SQLite and PostgreSQL): results of
one team committing at once leave its best rows exactly what a rebuild from its scores gives;
concurrent selections never exceed `final_selection`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.db import transaction

from apps.benchmarks.exceptions import TooManyFinals
from apps.benchmarks.models import Entry, Phase, TeamBest
from apps.benchmarks.services.finals import FinalsResult, final_set
from apps.benchmarks.services.scores import entry_scores_record
from apps.benchmarks.services.team_best import team_best_rebuild, team_lock
from tests.benchmarks.boards import acc, make_entry, make_phase, make_team, phase_changed, record
from tests.concurrency import run_concurrently
from tests.factories.users import make_user

RACERS = 6


def _bests(phase: Phase) -> dict[tuple[int, str], str | None]:
    return {
        (best.version, best.split): best.score.entry_id
        for best in TeamBest.objects.filter(phase=phase).select_related("score")
    }


def _rebuilt(phase: Phase, team_id: str) -> dict[tuple[int, str], str | None]:
    with transaction.atomic():
        team_lock(team_id=team_id)
        before = _bests(phase)
        team_best_rebuild(phase=phase, team_id=team_id)
        after = _bests(phase)
        transaction.set_rollback(True)
    assert before == after
    return after


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("final_selection", [0, 2])
def test_results_of_one_team_committing_at_once_keep_the_better(
    tmp_path: Path, final_selection: int
) -> None:
    phase = make_phase(tmp_path, phase_changed(final_selection=final_selection))
    team = make_team(phase, "t", make_user(username="m"))
    record(make_entry(phase, team), public=acc(0.01), private=acc(0.01))  # rows to update
    entries = [make_entry(phase, team) for _ in range(RACERS)]
    public = [0.5, 0.9, 0.7, 0.9, 0.6, 0.8]
    private = [0.95, 0.1, 0.2, 0.3, 0.99, 0.4]

    def result(index: int) -> None:
        entry = Entry.objects.select_related("phase", "submission").get(pk=entries[index].pk)
        with transaction.atomic():
            entry_scores_record(
                entry=entry,
                version=1,
                splits={"public": acc(public[index]), "private": acc(private[index])},
            )
            time.sleep(0.05)  # the rest of the result's transaction: the writes overlap

    outcomes = run_concurrently(result, RACERS)

    assert [o.error for o in outcomes] == [None] * RACERS
    bests = _bests(phase)
    # Public: 0.9 twice; the earlier submission (entries[1]) wins the tie.
    assert bests[(1, "public")] == entries[1].pk
    if final_selection == 0:
        assert bests[(1, "private")] == entries[4].pk  # the best hidden score of all
    else:
        # The two best by public are entries[1] and entries[3]: the better hidden is [3].
        assert bests[(1, "private")] == entries[3].pk
    assert bests == _rebuilt(phase, team.pk)
    assert TeamBest.objects.filter(phase=phase).count() == 2


@pytest.mark.django_db(transaction=True)
def test_two_results_at_once_in_many_rounds_keep_the_better(tmp_path: Path) -> None:
    phase = make_phase(tmp_path)
    team = make_team(phase, "t", make_user(username="m"))
    for round_ in range(5):
        pair = [make_entry(phase, team), make_entry(phase, team)]
        values = [0.1 * round_ + 0.01, 0.1 * round_ + 0.02]
        if round_ % 2:
            values.reverse()

        def result(index: int, pair: list[Entry] = pair, values: list[float] = values) -> None:
            entry = Entry.objects.select_related("phase", "submission").get(pk=pair[index].pk)
            splits = {"public": acc(values[index]), "private": acc(values[index])}
            with transaction.atomic():
                entry_scores_record(entry=entry, version=1, splits=splits)
                time.sleep(0.05)

        assert all(o.ok for o in run_concurrently(result, 2))
        best = TeamBest.objects.select_related("score").get(phase=phase, split="public")
        assert best.score.values["accuracy"] == max(values)
        assert _bests(phase) == _rebuilt(phase, team.pk)


@pytest.mark.django_db(transaction=True)
def test_concurrent_final_selections_stop_exactly_at_final_selection(tmp_path: Path) -> None:
    phase = make_phase(tmp_path)  # final_selection: 2
    members = [make_user(username=f"m{i}") for i in range(3)]
    team = make_team(phase, "t", *members)
    entries = [make_entry(phase, team, user=members[i % 3]) for i in range(RACERS)]
    for i, entry in enumerate(entries):
        record(entry, public=acc(0.1 * i), private=acc(0.5))

    def select(index: int) -> FinalsResult:
        return final_set(user=members[index % 3], submission_id=entries[index].pk, final=True)

    outcomes = run_concurrently(select, RACERS)

    chosen = [o for o in outcomes if o.ok]
    refused = [o for o in outcomes if not o.ok]
    assert len(chosen) == 2
    assert all(isinstance(o.error, TooManyFinals) for o in refused), [o.error for o in refused]
    assert Entry.objects.filter(phase=phase, final=True).count() == 2
    finals = set(Entry.objects.filter(final=True).values_list("pk", flat=True))
    assert {o.value.submission_id for o in chosen} == finals
    assert _bests(phase) == _rebuilt(phase, team.pk)


@pytest.mark.django_db(transaction=True)
def test_selections_racing_the_reveal_never_land_after_it(tmp_path: Path) -> None:
    from django.utils import timezone

    phase = make_phase(tmp_path, phase_changed(final_selection=RACERS))
    member = make_user(username="m")
    team = make_team(phase, "t", member)
    entries = [make_entry(phase, team) for _ in range(RACERS)]
    for entry in entries:
        record(entry, public=acc(0.5), private=acc(0.5))
    revealed_at = []

    def act(index: int) -> object:
        if index == RACERS:
            Phase.objects.filter(pk=phase.pk, revealed_at__isnull=True).update(
                revealed_at=timezone.now()
            )
            revealed_at.append(timezone.now())
            return None
        return final_set(user=member, submission_id=entries[index].pk, final=True)

    outcomes = run_concurrently(act, RACERS + 1)

    frozen = [o for o in outcomes[:RACERS] if not o.ok]
    assert all(o.error.code == "finals_frozen" for o in frozen)  # type: ignore[union-attr]
    chosen = Entry.objects.filter(final=True).count()
    assert chosen == RACERS - len(frozen)
    # After the reveal nothing changes any more.
    with pytest.raises(Exception, match="revealed"):
        final_set(user=member, submission_id=entries[0].pk, final=not entries[0].final)


@pytest.mark.django_db(transaction=True)
def test_results_that_leave_the_public_row_alone_still_rebuild_the_hidden_row_in_turn(
    tmp_path: Path,
) -> None:
    """The public best is a committed earlier result none of the racers beats, so only the
    hidden split's rebuild (the team's two best by public) decides: each racer must see the
    others' committed scores, which the team lock gives."""
    phase = make_phase(tmp_path)  # final_selection: 2
    team = make_team(phase, "t", make_user(username="m"))
    leader = make_entry(phase, team)
    record(leader, public=acc(0.99), private=acc(0.2))
    entries = [make_entry(phase, team) for _ in range(RACERS)]
    public = [0.5, 0.6, 0.9, 0.7, 0.8, 0.4]
    private = [0.95, 0.9, 0.3, 0.99, 0.1, 0.97]

    def result(index: int) -> None:
        entry = Entry.objects.select_related("phase", "submission").get(pk=entries[index].pk)
        with transaction.atomic():
            entry_scores_record(
                entry=entry,
                version=1,
                splits={"public": acc(public[index]), "private": acc(private[index])},
            )
            time.sleep(0.05)

    outcomes = run_concurrently(result, RACERS)

    assert [o.error for o in outcomes] == [None] * RACERS
    bests = _bests(phase)
    assert bests[(1, "public")] == leader.pk
    assert bests[(1, "private")] == entries[2].pk  # of the leader and entries[2] (0.9)
    assert bests == _rebuilt(phase, team.pk)
