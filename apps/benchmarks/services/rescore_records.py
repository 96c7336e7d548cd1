"""A rescore item's outcome written under its lease (SPEC §11.6).

`item_record` writes what scoring an item gave: the item `done` with its scores in the
rescore's version, or `failed` with the reason for hosts, only if the lease is still the
worker's (`lease_lost` otherwise), in one transaction. An entry's scores and its team's best
rows are written as `rescore_entries` does; a baseline's through the models.

On PostgreSQL an entry's whole record is one call of `RECORD_FUNCTION` (migration
benchmarks.0008), a PL/pgSQL function that runs the same statements in the same order: the
lease's conditional outcome UPDATE, then (scored) the team's row lock, the scores' INSERT …
ON CONFLICT DO NOTHING (a redelivered item writes nothing and the function says so), the
offered splits' upsert and each hidden split's rebuild. One round trip instead of seven
(BEGIN and COMMIT included), and the statements' plans are kept for the session instead of
being parsed and planned on every item; no prepared statements, so a transaction-pooling
PgBouncer does not break it. The call is its own transaction (or runs in the caller's), and
it commits asynchronously, as the outcome did (`rescore_takes`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from django.db import connection, transaction
from django.utils import timezone

from apps.benchmarks.models import RescoreItem, RescoreItemStatus, Score
from apps.benchmarks.services import rescore_takes
from apps.benchmarks.services.rescore_entries import (
    BEST_DELETE,
    BEST_HIDDEN,
    BEST_OFFER,
    TEAM_LOCK,
    EntryItem,
    Scores,
    entry_score_rows,
    hidden_rebuilds,
)
from apps.benchmarks.services.rescore_plans import RescorePlan, rescore_plan_for
from apps.benchmarks.services.team_best import PUBLIC
from apps.core.plpgsql import PlpgsqlFunction, parameters
from apps.core.sql import SqlStatement
from apps.grading.phase_results import storable_text
from apps.grading.phases import SCORING_FAILED
from apps.grading.results import GradingResult
from apps.submissions.models import SubmissionStatus

logger = logging.getLogger(__name__)
_PROCESSING = RescoreItemStatus.PROCESSING.value

# The outcome if the lease is still the caller's. Parameters: status, failure, logs,
# finished, item, processing, token.
SETTLE = SqlStatement(
    "UPDATE {i} SET {i.status} = %s, {i.failure} = %s, {i.logs} = %s,"
    " {i.lease_expires_at} = NULL, {i.finished_at} = %s"
    " WHERE {i.id} = %s AND {i.status} = %s AND {i.lease_token} = %s",
    i=RescoreItem,
)
# An entry's scores of every split from the function's arrays (split, values, metric key,
# order key), nothing for a split already scored in the version.
_SCORES = SqlStatement(
    "INSERT INTO {s} ({s.phase}, {s.version}, {s.split}, {s.entry}, {s.team}, {s.values},"
    " {s.metric_key}, {s.order_key}, {s.submitted_at}, {s.created_at})"
    " SELECT %s, %s, v.split, %s, %s, v.vals, v.metric_key, v.order_key, %s, %s"
    " FROM unnest(%s, %s, %s, %s) AS v(split, vals, metric_key, order_key)"
    " ON CONFLICT ({s.entry}, {s.version}, {s.split}) WHERE {s.entry} IS NOT NULL DO NOTHING",
    s=Score,
)
# The function's arguments: item, token, status, failure, logs, finished, processing, phase,
# version, entry, team, splits, values, metric keys, order keys, submitted, created, public,
# every split offered (no finals), hidden splits to rebuild, completed, no public split, a
# public split, final selection.
_RECORD_ARGUMENTS = (
    *("bigint", "character varying", "character varying", "character varying", "text"),
    *("timestamp with time zone", "character varying", "character varying", "integer"),
    *("character varying", "character varying", "character varying[]", "jsonb[]"),
    *("text[]", "text[]", "timestamp with time zone", "timestamp with time zone"),
    *("character varying", "boolean", "character varying[]", "character varying"),
    *("boolean", "boolean", "integer"),
)
_HIDDEN = "hidden_split"  # the function's loop variable: the hidden split being rebuilt


def _record_body(using: str) -> str:
    """The record's statements in order (module docstring). It returns `lease_lost`,
    `settled` (an outcome without scores), `scored_before` (the entry already had scores in
    the version: nothing written but the outcome) or `recorded`."""
    lock = TEAM_LOCK.render(using)
    if not lock.startswith("SELECT "):
        raise ValueError(lock)
    hidden = (8, 11, 21, 10, 22, 23, 18, 8, 9, 11, 24, 8, 9, _HIDDEN, 11)
    return (
        f"\nDECLARE\n  {_HIDDEN} character varying;\nBEGIN\n"
        f"  {parameters(SETTLE.render(using), (3, 4, 5, 6, 1, 7, 2))};\n"
        "  IF NOT FOUND THEN\n    RETURN 'lease_lost';\n  END IF;\n"
        "  PERFORM set_config('synchronous_commit', 'off', true);\n"
        "  IF cardinality($12) = 0 THEN\n    RETURN 'settled';\n  END IF;\n"
        f"  PERFORM {parameters(lock.removeprefix('SELECT '), (11,))};\n"
        f"  {parameters(_SCORES.render(using), (8, 9, 10, 11, 16, 17, 12, 13, 14, 15))};\n"
        "  IF NOT FOUND THEN\n    RETURN 'scored_before';\n  END IF;\n"
        f"  {parameters(BEST_OFFER.render(using), (10, 9, 18, 19))};\n"
        f"  FOREACH {_HIDDEN} IN ARRAY $20 LOOP\n"
        f"    {parameters(BEST_HIDDEN.render(using), hidden)};\n"
        "    IF NOT FOUND THEN\n"
        f"      {parameters(BEST_DELETE.render(using), (8, 9, _HIDDEN, 11))};\n"
        "    END IF;\n  END LOOP;\n"
        "  RETURN 'recorded';\n"
        "END\n"
    )


RECORD_FUNCTION = PlpgsqlFunction(
    name="benchmarks_rescore_entry_record",
    arguments=_RECORD_ARGUMENTS,
    returns="text",
    body=_record_body,
)


def _entry_record(
    *,
    taken: tuple[int, str],
    outcome: tuple[str, str, str],
    entry: EntryItem,
    scores: Scores | None,
    cached: RescorePlan | None,
) -> str:
    """One call of `RECORD_FUNCTION`: the outcome and, when scored, the entry's scores and
    its team's rows; what the function returned."""
    item_id, token = taken
    rows: list[tuple[str, dict[str, float], str, str]] = []
    hidden: list[str] = []
    has_public = False
    if scores:
        plan = cached or rescore_plan_for(
            phase_id=entry.phase_id,
            version=entry.version,
            bundle_file=entry.bundle_file,
            bundle_sha256=entry.bundle_sha256,
        )
        rows = entry_score_rows(item=entry, splits=scores, metrics=plan.metrics)
        hidden = hidden_rebuilds(item=entry, splits=scores, phase_splits=plan.splits)
        has_public = any(name == PUBLIC for name, _ in plan.splits)
    encoder = Score._meta.get_field("values").encoder
    with connection.cursor() as cursor:
        cursor.execute(
            RECORD_FUNCTION.call_sql(),
            [
                *(item_id, token, *outcome, timezone.now(), _PROCESSING),
                *(entry.phase_id, entry.version, entry.entry_id, entry.team_id),
                [row[0] for row in rows],
                [json.dumps(row[1], cls=encoder) for row in rows],
                [row[2] for row in rows],
                [row[3] for row in rows],
                *(entry.submitted_at, timezone.now(), PUBLIC, entry.final_selection <= 0),
                hidden,
                SubmissionStatus.COMPLETED.value,
                *(not has_public, has_public, entry.final_selection),
            ],
        )
        row = cursor.fetchone()
    return str(row[0])


def item_record(
    *,
    taken: tuple[int, str],
    result: GradingResult,
    write: Callable[[Scores], None],
    entry: EntryItem | None = None,
    cached: RescorePlan | None = None,
) -> str:
    """Write the outcome of the item `taken` (its id and lease token) if the lease is still
    the caller's, with its scores when scored (`write` stores them in the same transaction;
    an entry's `entry` and plan `cached` on PostgreSQL, in one call); `done`, `failed` or
    `lease_lost`."""
    phase = result.phase
    scored = phase is not None and not phase.failure and bool(phase.scores)
    if phase is None:
        failure, logs = SCORING_FAILED, result.reason
    else:
        failure = "" if scored else (phase.failure or SCORING_FAILED)
        logs = phase.scoring_logs or result.reason
    status = RescoreItemStatus.DONE.value if scored else RescoreItemStatus.FAILED.value
    done = "done" if scored else "failed"
    scores = phase.scores if scored and phase is not None else None
    if entry is not None and rescore_takes.fast():
        outcome = (status, failure, storable_text(logs))
        found = _entry_record(
            taken=taken, outcome=outcome, entry=entry, scores=scores, cached=cached
        )
        if found == "scored_before":
            logger.warning("rescore: item %s was already scored in v%s", taken[0], entry.version)
        return "lease_lost" if found == "lease_lost" else done
    item_id, token = taken
    with transaction.atomic():
        if rescore_takes.fast():
            written = rescore_takes.item_settle(
                item_id=item_id,
                token=token,
                status=status,
                failure=failure,
                logs=storable_text(logs),
                finished=timezone.now(),
            )
        else:
            written = bool(
                SETTLE.rowcount(
                    [
                        *(status, failure, storable_text(logs)),
                        connection.ops.adapt_datetimefield_value(timezone.now()),
                        *(item_id, _PROCESSING, token),
                    ]
                )
            )
        if not written:
            return "lease_lost"
        if scores is not None:
            write(scores)
    return done
