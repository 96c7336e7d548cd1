"""An entry's rescore item read and recorded in kept SQL (SPEC §11.6).

A rescore runs these once per item, thousands of times in a row: the ORM compiled each of
them for longer than the database ran it (docs/benchmarks.md, "Rescoring"). What they do is
what `rescore_item_load`, `entry_scores_record` and `team_best_rebuild` do for one entry, in
fewer statements:

- the item, its rescore, entry, submission, phase, challenge and the submission's files in
  one read (`entry_item_load`);
- the scores of every split in one INSERT that does nothing for a split already scored in
  the version (the scores' unique constraint: a redelivered item writes nothing twice);
- the team's best rows of the offered splits (the public one; every split without finals)
  in one INSERT … ON CONFLICT that only ever makes a row better, as the grading path's
  conditional UPDATE does;
- each hidden split of a phase with finals rebuilt from the team's finals (or its
  `final_selection` best public scores when it has none) in one INSERT … ON CONFLICT, and a
  DELETE only when the team has no candidate scored in the version.

Every write runs in the caller's transaction, after the team's row lock (PostgreSQL; SQLite
serializes write transactions), as every writer of a team's best rows does
(`apps.benchmarks.services.team_best`).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from django.db import connection
from django.db.models import Field, Model
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from apps.benchmarks.models import (
    Challenge,
    Entry,
    Phase,
    Rescore,
    RescoreItem,
    Score,
    Team,
    TeamBest,
)
from apps.benchmarks.ranking import metric_key, order_key
from apps.benchmarks.services.rescore_plans import RescorePlan, rescore_plan_for
from apps.benchmarks.services.team_best import PUBLIC
from apps.core.sql import SqlStatement
from apps.grading.baselines import kept_predictions_score
from apps.grading.grader import GradingFile
from apps.grading.results import GradingResult
from apps.submissions.models import Submission, SubmissionFile, SubmissionStatus

logger = logging.getLogger(__name__)
Scores = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class EntryItem:
    """What scoring and recording an entry's item read."""

    item_id: int
    version: int
    entry_id: str  # the submission's id (an entry's primary key)
    team_id: str
    submitted_at: dt.datetime
    kept_predictions: str
    phase_id: str
    kind: str
    final_selection: int
    bundle_file: str
    bundle_sha256: str
    files: tuple[GradingFile, ...]  # the submission's files in upload order


#: The columns an entry's item is read with (`entry_item_from_rows`), one row per file, and
#: the tables they name: here by the item's id, in `rescore_takes` by the item just leased.
ENTRY_ITEM_COLUMNS = (
    "{r}.{r.version}, {e}.{e.submission}, {e}.{e.team}, {u}.{u.created_at},"
    " {e}.{e.kept_predictions}, {p}.{p.id}, {p}.{p.kind}, {p}.{p.final_selection},"
    " {c}.{c.bundle_file}, {c}.{c.bundle_sha256}, {f}.{f.filename}, {f}.{f.storage_name}"
)
ENTRY_ITEM_TABLES: dict[str, type[Model]] = {
    "i": RescoreItem,
    "r": Rescore,
    "e": Entry,
    "u": Submission,
    "p": Phase,
    "c": Challenge,
    "f": SubmissionFile,
}
_LOAD = SqlStatement(
    "SELECT " + ENTRY_ITEM_COLUMNS + " FROM {i} JOIN {r} ON {r}.{r.id} = {i}.{i.rescore}"  # noqa: S608
    " JOIN {e} ON {e}.{e.submission} = {i}.{i.entry}"
    " JOIN {u} ON {u}.{u.id} = {e}.{e.submission}"
    " JOIN {p} ON {p}.{p.id} = {e}.{e.phase}"
    " JOIN {c} ON {c}.{c.id} = {p}.{p.challenge}"
    " LEFT JOIN {f} ON {f}.{f.submission} = {u}.{u.id}"
    " WHERE {i}.{i.id} = %s ORDER BY {f}.{f.uploaded_at}, {f}.{f.id}",
    **ENTRY_ITEM_TABLES,
)
TEAM_LOCK = SqlStatement("SELECT {t.id} FROM {t} WHERE {t.id} = %s FOR UPDATE", t=Team)
# The entry's scores of the offered splits become the team's rows where it has none or a
# worse one (a smaller order key is better): the database compares, whoever commits first.
BEST_OFFER = SqlStatement(
    "INSERT INTO {b} ({b.phase}, {b.version}, {b.split}, {b.team}, {b.score},"
    " {b.metric_key}, {b.order_key})"
    " SELECT {s.phase}, {s.version}, {s.split}, {s.team}, {s.id}, {s.metric_key},"
    " {s.order_key} FROM {s}"
    " WHERE {s.entry} = %s AND {s.version} = %s AND ({s.split} = %s OR %s)"
    " ON CONFLICT ({b.phase}, {b.version}, {b.split}, {b.team}) DO UPDATE SET"
    " {b.score} = excluded.{b.score}, {b.metric_key} = excluded.{b.metric_key},"
    " {b.order_key} = excluded.{b.order_key}"
    " WHERE {b}.{b.order_key} > excluded.{b.order_key}",
    b=TeamBest,
    s=Score,
)
# A hidden split's row: the best score in the version among the team's counted, completed
# entries (and the one being recorded) that are finals; without finals, among the entries of
# its `final_selection` best public scores; without a public split, among all of them
# (`team_best._candidates`). Parameters: phase, team, completed, entry, no public split,
# has a public split, public, phase, version, team, final_selection, phase, version, split,
# team.
BEST_HIDDEN = SqlStatement(
    "INSERT INTO {b} ({b.phase}, {b.version}, {b.split}, {b.team}, {b.score},"
    " {b.metric_key}, {b.order_key})"
    " WITH eligible AS ("
    " SELECT {e}.{e.submission} AS id, {e}.{e.final} AS is_final FROM {e}"
    " JOIN {u} ON {u}.{u.id} = {e}.{e.submission}"
    " WHERE {e}.{e.phase} = %s AND {e}.{e.team} = %s"
    " AND (({e}.{e.counted} AND {u}.{u.status} = %s) OR {e}.{e.submission} = %s)),"
    " pool AS (SELECT id FROM eligible WHERE is_final OR %s"
    " UNION ALL SELECT * FROM (SELECT {s.entry} FROM {s} WHERE %s"
    " AND NOT EXISTS (SELECT 1 FROM eligible WHERE is_final) AND {s.split} = %s"
    " AND {s.phase} = %s AND {s.version} = %s AND {s.team} = %s"
    " AND {s.entry} IN (SELECT id FROM eligible) ORDER BY {s.order_key} LIMIT %s) AS by_public)"
    " SELECT {s.phase}, {s.version}, {s.split}, {s.team}, {s.id}, {s.metric_key},"
    " {s.order_key} FROM {s}"
    " WHERE {s.phase} = %s AND {s.version} = %s AND {s.split} = %s AND {s.team} = %s"
    " AND {s.entry} IN (SELECT id FROM pool) ORDER BY {s.order_key} LIMIT 1"
    " ON CONFLICT ({b.phase}, {b.version}, {b.split}, {b.team}) DO UPDATE SET"
    " {b.score} = excluded.{b.score}, {b.metric_key} = excluded.{b.metric_key},"
    " {b.order_key} = excluded.{b.order_key}",
    b=TeamBest,
    s=Score,
    e=Entry,
    u=Submission,
)
BEST_DELETE = SqlStatement(
    "DELETE FROM {b} WHERE {b.phase} = %s AND {b.version} = %s AND {b.split} = %s"
    " AND {b.team} = %s",
    b=TeamBest,
)
_SCORE_INSERT = (
    "INSERT INTO {s} ({s.phase}, {s.version}, {s.split}, {s.entry}, {s.team}, {s.values},"
    " {s.metric_key}, {s.order_key}, {s.submitted_at}, {s.created_at}) VALUES"
    " ON CONFLICT ({s.entry}, {s.version}, {s.split}) WHERE {s.entry} IS NOT NULL DO NOTHING"
)
_score_inserts: dict[int, SqlStatement] = {}


def _score_insert(rows: int) -> SqlStatement:
    """The INSERT of `rows` scores of one entry (nothing for a split already scored)."""
    found = _score_inserts.get(rows)
    if found is None:
        marks = ", ".join(["(" + ", ".join(["%s"] * 10) + ")"] * rows)
        found = SqlStatement(
            _SCORE_INSERT.replace("VALUES", "VALUES " + marks),
            s=Score,
        )
        _score_inserts[rows] = found
    return found


def _moment(value: Any) -> dt.datetime:
    """A datetime column as the cursor gave it, aware (SQLite's are naive UTC)."""
    moment = parse_datetime(value) if isinstance(value, str) else value
    if moment is None:
        raise ValueError(f"not a datetime: {value!r}")
    return moment if timezone.is_aware(moment) else moment.replace(tzinfo=dt.UTC)


def entry_item_load(*, item_id: int) -> EntryItem | None:
    """An entry's item with what scoring and recording it read, in one query; None when the
    item names no entry."""
    return entry_item_from_rows(item_id=item_id, rows=_LOAD.fetchall([item_id]))


def entry_item_from_rows(*, item_id: int, rows: Sequence[Sequence[Any]]) -> EntryItem | None:
    """An `EntryItem` from the rows of `_LOAD`'s columns (one per file, in upload order);
    None when there are none or they name no entry."""
    if not rows or rows[0][1] is None:
        return None
    first = rows[0]
    files = tuple(
        GradingFile(filename=str(row[10]), storage_name=str(row[11]))
        for row in rows
        if row[10] is not None
    )
    return EntryItem(
        item_id=item_id,
        version=int(first[0]),
        entry_id=str(first[1]),
        team_id=str(first[2]),
        submitted_at=_moment(first[3]),
        kept_predictions=str(first[4]),
        phase_id=str(first[5]),
        kind=str(first[6]),
        final_selection=int(first[7]),
        bundle_file=str(first[8]),
        bundle_sha256=str(first[9]),
        files=files,
    )


def entry_score_rows(
    *, item: EntryItem, splits: Scores, metrics: tuple[tuple[str, str], ...]
) -> list[tuple[str, dict[str, float], str, str]]:
    """(split, values, metric key, order key) of each split's scores of the entry: its score
    rows' own columns. Raises KeyError or ValueError for a missing or non-finite metric."""
    rows = []
    for split, values in splits.items():
        key = metric_key(values, list(metrics))
        rows.append((split, dict(values), key, order_key(key, item.submitted_at, item.entry_id)))
    return rows


def hidden_rebuilds(
    *, item: EntryItem, splits: Scores, phase_splits: tuple[tuple[str, bool], ...]
) -> list[str]:
    """The hidden splits whose team row is rebuilt once the entry's scores are stored: every
    hidden split of a phase with finals, unless the entry was scored on the public one only."""
    if item.final_selection <= 0 or all(split == PUBLIC for split in splits):
        return []
    return [name for name, hidden in phase_splits if hidden]


def entry_item_scores_write(
    *,
    item: EntryItem,
    splits: Scores,
    metrics: tuple[tuple[str, str], ...],
    phase_splits: tuple[tuple[str, bool], ...],
) -> bool:
    """Store `splits` {split: {metric: value}} as the entry's scores in the item's version
    and keep its team's best rows, as `entry_scores_record` does. Runs inside the caller's
    transaction; locks the team's row (PostgreSQL) until it ends. False when the entry was
    already scored in the version (nothing written)."""
    if not connection.in_atomic_block:
        raise RuntimeError("entry_item_scores_write runs inside the caller's transaction")
    if connection.vendor == "postgresql":
        TEAM_LOCK.fetchone([item.team_id])
    values_field = cast(Field[Any, Any], Score._meta.get_field("values"))
    submitted = connection.ops.adapt_datetimefield_value(item.submitted_at)
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    params: list[Any] = []
    for split, values, key, order in entry_score_rows(item=item, splits=splits, metrics=metrics):
        params += [
            *(item.phase_id, item.version, split, item.entry_id, item.team_id),
            values_field.get_db_prep_save(values, connection),
            *(key, order, submitted, now),
        ]
    if not _score_insert(len(splits)).rowcount(params):
        return False
    BEST_OFFER.rowcount([item.entry_id, item.version, PUBLIC, item.final_selection <= 0])
    has_public = any(name == PUBLIC for name, _ in phase_splits)
    where = [item.phase_id, item.version]
    for name in hidden_rebuilds(item=item, splits=splits, phase_splits=phase_splits):
        found = BEST_HIDDEN.rowcount(
            [
                *(item.phase_id, item.team_id, SubmissionStatus.COMPLETED.value, item.entry_id),
                not has_public,
                has_public,
                PUBLIC,
                *(item.phase_id, item.version, item.team_id, item.final_selection),
                *(*where, name, item.team_id),
            ]
        )
        if not found:
            BEST_DELETE.rowcount([*where, name, item.team_id])
    return True


def entry_item_score(item: EntryItem) -> tuple[GradingResult, RescorePlan]:
    """Stage 2 of the item's version on an entry's kept predictions (no transaction held),
    and the plan it used."""
    cached = rescore_plan_for(
        phase_id=item.phase_id,
        version=item.version,
        bundle_file=item.bundle_file,
        bundle_sha256=item.bundle_sha256,
    )
    if item.kind == "code":
        if not item.kept_predictions:
            return GradingResult(
                outcome="failed", reason="the run stage's predictions were not kept"
            ), cached
        files = (GradingFile(filename="predictions.tar.gz", storage_name=item.kept_predictions),)
        kept = kept_predictions_score(
            plan=cached.plan, files=files, kept_archive="predictions.tar.gz"
        )
        return kept, cached
    return kept_predictions_score(plan=cached.plan, files=item.files), cached


def entry_item_write(item: EntryItem, cached: RescorePlan | None) -> Callable[[Scores], None]:
    """Store an entry's scores in kept SQL (`rescore_entries`); a second delivery writes
    nothing (the scores' unique constraint)."""

    def write(scores: Scores) -> None:
        plan = cached or rescore_plan_for(
            phase_id=item.phase_id,
            version=item.version,
            bundle_file=item.bundle_file,
            bundle_sha256=item.bundle_sha256,
        )
        if not entry_item_scores_write(
            item=item, splits=scores, metrics=plan.metrics, phase_splits=plan.splits
        ):
            logger.warning("rescore: item %s was already scored in v%s", item.item_id, item.version)

    return write
