"""Writing scores (SPEC §11.2-§11.3): the one place a `Score` and a team's `TeamBest` are
written, inside the caller's transaction (the grading result's, so a score and the
submission's `completed` commit together).

A team's best row per (phase, version, split) is inserted, or moved by a conditional UPDATE
that only ever makes it better (`order_key` smaller): two results of one team committing at
once leave the better of the two whatever the order, on SQLite and PostgreSQL. Every writer of
a team's best rows holds the team's row lock (`apps.benchmarks.services.team_best`), and a
hidden split of a phase with finals (`final_selection` > 0) is rebuilt from the team's finals
rather than offered.

A rescore writes an entry's scores and team rows with the same rules in kept SQL
(`apps.benchmarks.services.rescore_entries`, one statement per step, run once per item);
`tests/benchmarks/test_rescore_team_rows.py` checks its rows against `team_best_rebuild`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.db import IntegrityError, transaction

from apps.benchmarks.models import Baseline, Entry, Phase, Score, TeamBest
from apps.benchmarks.ranking import metric_key, order_key, ranking_metrics
from apps.benchmarks.services.team_best import PUBLIC, team_best_rebuild, team_lock


def phase_ranking_metrics(phase: Phase) -> list[tuple[str, str]]:
    pairs = [(m.key, m.direction) for m in phase.metrics.order_by("order")]
    return ranking_metrics(pairs, phase.primary_metric)


def entry_scores_record(
    *,
    entry: Entry,
    version: int,
    splits: Mapping[str, Mapping[str, float]],
    metrics: Sequence[tuple[str, str]] | None = None,
    phase_splits: Sequence[tuple[str, bool]] | None = None,
) -> list[Score]:
    """Store `splits` {split: {metric: value}} as the entry's scores in `version` and keep
    its team's best rows. Every declared metric of every split must be there and finite (the
    caller checked; KeyError or ValueError otherwise). `metrics`: the phase's ranking metrics
    when the caller has them (`phase_ranking_metrics`), `phase_splits` its (split, hidden)
    pairs (`team_best.phase_splits`). Must run inside a transaction; locks
    the entry's team row until it ends (after whatever the caller locked before). The scores
    are one INSERT, the team's best rows one read and a write per split that improves."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("entry_scores_record runs inside the result's transaction")
    phase = entry.phase
    ranking = phase_ranking_metrics(phase) if metrics is None else list(metrics)
    submitted_at = entry.submission.created_at
    team_lock(team_id=entry.team_id)
    by_finals = phase.final_selection > 0
    written: list[Score] = []
    for split, values in splits.items():
        key = metric_key(values, ranking)
        written.append(
            Score(
                phase=phase,
                version=version,
                split=split,
                entry=entry,
                team_id=entry.team_id,
                values=dict(values),
                metric_key=key,
                order_key=order_key(key, submitted_at, entry.submission_id),
                submitted_at=submitted_at,
            )
        )
    written = Score.objects.bulk_create(written)
    _team_best_offer_all([s for s in written if s.split == PUBLIC or not by_finals])
    if by_finals and any(split != PUBLIC for split in splits):
        team_best_rebuild(
            phase=phase,
            team_id=entry.team_id,
            versions=[version],
            hidden_only=True,
            including=entry.pk,
            splits=phase_splits,
        )
    return written


def baseline_scores_record(
    *, baseline: Baseline, version: int, splits: Mapping[str, Mapping[str, float]]
) -> list[Score]:
    """Store a baseline's scores in `version` (a baseline has no team and no best row)."""
    phase = baseline.phase
    metrics = phase_ranking_metrics(phase)
    written: list[Score] = []
    with transaction.atomic():
        for split, values in splits.items():
            key = metric_key(values, metrics)
            score, _ = Score.objects.update_or_create(
                baseline=baseline,
                version=version,
                split=split,
                defaults={
                    "phase": phase,
                    "values": dict(values),
                    "metric_key": key,
                    "order_key": order_key(key, phase.start, f"baseline{baseline.pk:020d}"),
                    "submitted_at": phase.start,
                },
            )
            written.append(score)
    return written


def _team_best_offer_all(scores: list[Score]) -> None:
    """`_team_best_offer` for scores of one team, phase and version (the team lock held):
    one read of the team's rows, then an INSERT of the missing rows and a conditional UPDATE
    (never worse) per existing one. A concurrent insert (IntegrityError) falls back to one
    offer per score."""
    if not scores:
        return
    first = scores[0]
    where = {"phase_id": first.phase_id, "version": first.version, "team_id": first.team_id}
    current = dict(
        TeamBest.objects.filter(**where, split__in=[s.split for s in scores]).values_list(
            "split", "order_key"
        )
    )
    missing = [s for s in scores if s.split not in current]
    if missing:
        try:
            with transaction.atomic():
                TeamBest.objects.bulk_create(
                    TeamBest(
                        **where,
                        split=s.split,
                        score_id=s.pk,
                        metric_key=s.metric_key,
                        order_key=s.order_key,
                    )
                    for s in missing
                )
        except IntegrityError:
            for score in missing:
                _team_best_offer(score)
    for score in scores:
        if score.split in current:  # the database compares, as `_team_best_offer` does
            worse = TeamBest.objects.filter(
                **where, split=score.split, order_key__gt=score.order_key
            )
            worse.update(score_id=score.pk, metric_key=score.metric_key, order_key=score.order_key)


def _team_best_offer(score: Score) -> None:
    """Make `score` its team's best row if it is better than the current one (or the first)."""
    fields = {
        "score_id": score.pk,
        "metric_key": score.metric_key,
        "order_key": score.order_key,
    }
    where = {
        "phase_id": score.phase_id,
        "version": score.version,
        "split": score.split,
        "team_id": score.team_id,
    }
    if TeamBest.objects.filter(**where, order_key__gt=score.order_key).update(**fields):
        return
    if TeamBest.objects.filter(**where).exists():
        return  # the current best is better
    try:
        with transaction.atomic():
            TeamBest.objects.create(**where, **fields)
    except IntegrityError:
        # Another result of the team inserted first and committed: compare again.
        TeamBest.objects.filter(**where, order_key__gt=score.order_key).update(**fields)
