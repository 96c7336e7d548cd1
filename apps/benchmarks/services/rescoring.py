"""Rescore work (SPEC §11.6): one item at a time per work chain, leased like a grading.

`rescore_next(rescore_id)` is the task's service. It takes one item of a live rescore by a
compare-and-set UPDATE (a `pending` item, or a `processing` one whose lease expired: the
worker that held it died), runs stage 2 alone on the item's kept predictions with no
transaction held while a thread renews the lease, then writes the outcome only if the lease
is still its own: the item `done` with the entry's (or baseline's) scores in the rescore's
version, or `failed` with the reason for hosts. The scores' unique constraint
(entry|baseline, version, split) and the item's (rescore, entry|baseline) make each
(submission, version) scored once however often a task is delivered or a worker dies. Then
it switches the leaderboard if nothing is left open, and enqueues itself again (one chain
keeps at most one worker busy: `RESCORE_WORKERS` chains per rescore, so that new
submissions, on the same queue, always find a worker). While no job is queued for a worker,
one task scores up to `RESCORE_BATCH` items in a row (within GRADING_TIMEOUT, so the task
stays within its time limit) before it hands its chain to a new task: a waiting job waits
for one item at most, as with one item per task, and idle workers skip a task round trip per
item. A task that finds RESCORE_WORKERS chains holding live leases ends at once (`enough`):
the extra chain a result added while the rescore runs starts (`rescore_entry_add`) never
takes a worker that new submissions need. An item whose lease expired `GRADING_MAX_ATTEMPTS`
times fails `worker_lost`. A chain records an item on a thread of its own while it scores
the next one (`rescore_overlap`): the database's waits are off its sandbox's path. The
per-item statements of the take and the outcome are kept SQL (`apps.core.sql`): compiling
them cost more than running them; an entry's item is read and its scores and team rows
written the same way (`rescore_entries`); on PostgreSQL the take, lease and read are one
statement, and the lease and outcome commit asynchronously (`rescore_takes`); the take and an
entry's whole record are one PL/pgSQL function call each (`rescore_records`).

`rescores_reap`: every minute, a live rescore with open items and no chain seen working
for a lease's length gets its chains again (a Redis broker never re-delivers the task of a
cluster that died).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.benchmarks.models import Rescore, RescoreItem, RescoreItemStatus, RescoreState
from apps.benchmarks.services import rescore_takes
from apps.benchmarks.services.rescore_entries import (
    EntryItem,
    Scores,
    entry_item_load,
    entry_item_score,
    entry_item_write,
)
from apps.benchmarks.services.rescore_overlap import Recorder
from apps.benchmarks.services.rescore_plans import (
    RescorePlan,
    rescore_item_load,
    rescore_plan,
)
from apps.benchmarks.services.rescore_records import item_record
from apps.benchmarks.services.rescores import (
    LIVE,
    OPEN,
    rescore_chains_enqueue,
    rescore_switch_if_complete,
    rescore_workers,
)
from apps.benchmarks.services.scores import baseline_scores_record, entry_scores_record
from apps.core.cluster import WorkerStopping, interruptible, worker_leave, worker_stopping
from apps.core.sql import SqlStatement
from apps.grading.baselines import bundle_folder_score, kept_predictions_score
from apps.grading.grader import GradingFile
from apps.grading.leases import grading_lease_seconds
from apps.grading.phases import BundleFolder
from apps.grading.results import GradingResult
from apps.jobs.selectors import jobs_waiting
from apps.submissions.selectors import submission_file_list

logger = logging.getLogger(__name__)

WORKER_LOST = rescore_takes.WORKER_LOST
_CANDIDATES = 8
_PENDING, _PROCESSING = RescoreItemStatus.PENDING.value, RescoreItemStatus.PROCESSING.value


@dataclass(frozen=True)
class _Taken:
    item_id: int
    token: str
    of_entry: bool  # an entry's item (else a baseline's)
    entry: EntryItem | None = None  # the entry's item, when the take read it


def _expired_or_pending(now: dt.datetime) -> Q:
    return Q(status=RescoreItemStatus.PENDING) | Q(
        status=RescoreItemStatus.PROCESSING, lease_expires_at__lt=now
    )


# The take's read and writes run once per item: SQL kept, not compiled per call
# (`apps.core.sql`). The read is up to 8 expired leases (their worker died) and up to 8
# pending items, each part walking the index (rescore, status, id) in id order: it costs the
# same with 10 or 10,000 items left (one OR of both states sorted every open item).
_CANDIDATE_ITEMS = SqlStatement(
    "SELECT * FROM (SELECT {i.id}, {i.status}, {i.attempts}, {i.lease_token}, {i.entry}"
    " FROM {i} WHERE {i.rescore} = %s AND {i.status} = %s AND {i.lease_expires_at} < %s"
    " AND EXISTS (SELECT 1 FROM {r} WHERE {r.id} = %s AND {r.state} IN (%s, %s))"
    " ORDER BY {i.id} LIMIT 8) AS expired"
    " UNION ALL"
    " SELECT * FROM (SELECT {i.id}, {i.status}, {i.attempts}, {i.lease_token}, {i.entry}"
    " FROM {i} WHERE {i.rescore} = %s AND {i.status} = %s"
    " AND EXISTS (SELECT 1 FROM {r} WHERE {r.id} = %s AND {r.state} IN (%s, %s))"
    " ORDER BY {i.id} LIMIT 8) AS waiting",
    i=RescoreItem,
    r=Rescore,
)
_LEASE = SqlStatement(
    "UPDATE {i} SET {i.status} = %s, {i.lease_token} = %s, {i.lease_expires_at} = %s,"
    " {i.attempts} = {i.attempts} + 1"
    " WHERE {i.id} = %s AND {i.status} = %s AND {i.attempts} = %s AND {i.lease_token} = %s",
    i=RescoreItem,
)
_LEASED = SqlStatement(
    "SELECT COUNT(DISTINCT SUBSTR({i.lease_token}, 1, %s)) FROM {i}"
    " WHERE {i.rescore} = %s AND {i.status} = %s AND {i.lease_expires_at} >= %s",
    i=RescoreItem,
)


def _candidates(*, rescore_id: int, now: dt.datetime) -> list[tuple[Any, ...]]:
    """Up to 8 items to try: expired leases first, then pending ones, each in id order."""
    live = (rescore_id, *(state.value for state in LIVE))
    when = connection.ops.adapt_datetimefield_value(now)
    rows = _CANDIDATE_ITEMS.fetchall(
        [rescore_id, _PROCESSING, when, *live, rescore_id, _PENDING, *live]
    )
    rows.sort(key=lambda row: (row[1] != _PROCESSING, row[0]))
    return rows[:_CANDIDATES]


def _item_take(*, rescore_id: int, yield_to_jobs: bool = False) -> _Taken | str | None:
    """Lease one open item of the live rescore, or None when none is free. `yield_to_jobs`
    (PostgreSQL): JOB_WAITING instead when a job is queued for a worker, asked in the take's
    own round trip (other databases ask in `_go_on`)."""
    max_attempts = int(settings.GRADING_MAX_ATTEMPTS)
    fast = rescore_takes.item_take(
        rescore_id=rescore_id, max_attempts=max_attempts, yield_to_jobs=yield_to_jobs
    )
    if isinstance(fast, str):
        return fast
    if fast is not None:  # PostgreSQL: taken, leased and read in one statement
        return _Taken(fast.item_id, fast.token, fast.entry is not None, fast.entry)
    while True:
        now = timezone.now()
        rows = _candidates(rescore_id=rescore_id, now=now)
        if not rows:
            return None
        for pk, status, attempts, old, entry_id in rows:
            same = {"pk": pk, "status": status, "attempts": attempts, "lease_token": old}
            if status == _PROCESSING and attempts >= max_attempts:
                RescoreItem.objects.filter(**same).update(
                    status=RescoreItemStatus.FAILED,
                    failure=WORKER_LOST,
                    logs=f"The worker was lost {attempts} times while scoring.",
                    lease_expires_at=None,
                    finished_at=now,
                )
                continue
            token = rescore_takes.lease_token()
            expires = now + dt.timedelta(seconds=grading_lease_seconds())
            leased = _LEASE.rowcount(
                [
                    _PROCESSING,
                    token,
                    connection.ops.adapt_datetimefield_value(expires),
                    *(pk, status, attempts, old),
                ]
            )
            if leased:
                return _Taken(pk, token, entry_id is not None)


def _score(item: RescoreItem, version: int) -> tuple[GradingResult, RescorePlan | None]:
    """Stage 2 of `version` on the item's kept predictions (no transaction held), and the
    plan it used (None when it could not be made)."""
    bundle = str(getattr(item, "version_bundle", "") or "")
    if item.entry is not None:
        entry = item.entry
        cached = rescore_plan(phase=entry.phase, version=version, version_bundle=bundle)
        if entry.phase.kind == "code":
            if not entry.kept_predictions:
                return _failed("the run stage's predictions were not kept"), cached
            files: tuple[GradingFile, ...] = (
                GradingFile(filename="predictions.tar.gz", storage_name=entry.kept_predictions),
            )
            kept = kept_predictions_score(
                plan=cached.plan, files=files, kept_archive="predictions.tar.gz"
            )
            return kept, cached
        files = tuple(
            GradingFile(filename=f.filename, storage_name=f.storage_name)
            for f in submission_file_list(submission=entry.submission)
        )
        return kept_predictions_score(plan=cached.plan, files=files), cached
    if item.baseline is None:
        return _failed("the item names neither a submission nor a baseline"), None
    phase = item.baseline.phase
    cached = rescore_plan(phase=phase, version=version, version_bundle=bundle)
    folder = BundleFolder(phase.challenge.bundle_file, item.baseline.folder, item.baseline.digest)
    return bundle_folder_score(plan=cached.plan, predictions=folder), cached


def _failed(reason: str) -> GradingResult:
    return GradingResult(outcome="failed", reason=reason)


def _item_write(
    item: RescoreItem, version: int, cached: RescorePlan | None
) -> Callable[[Scores], None]:
    """Store a baseline's (or an entry's, read by the ORM) scores through the models."""

    def write(scores: Scores) -> None:
        try:
            with transaction.atomic():
                if item.entry is not None:
                    entry_scores_record(
                        entry=item.entry,
                        version=version,
                        splits=scores,
                        metrics=None if cached is None else cached.metrics,
                        phase_splits=None if cached is None else cached.splits,
                    )
                elif item.baseline is not None:
                    baseline_scores_record(baseline=item.baseline, version=version, splits=scores)
        except IntegrityError:
            logger.warning("rescore: item %s was already scored in v%s", item.pk, version)

    return write


def _give_back(taken: _Taken) -> None:
    """A stopping worker's item goes back to `pending`, its attempt uncounted."""
    RescoreItem.objects.filter(
        pk=taken.item_id, status=RescoreItemStatus.PROCESSING, lease_token=taken.token
    ).update(
        status=RescoreItemStatus.PENDING,
        lease_token="",
        lease_expires_at=None,
        attempts=F("attempts") - 1,
    )


@dataclass(frozen=True)
class _Scored:
    """An item scored under its lease, its outcome not yet written."""

    taken: _Taken
    result: GradingResult
    write: Callable[[Scores], None]
    version: int
    entry: EntryItem | None  # an entry's item read by the take: one call records it
    cached: RescorePlan | None

    def record(self) -> str:
        outcome = item_record(
            taken=(self.taken.item_id, self.taken.token),
            result=self.result,
            write=self.write,
            entry=self.entry,
            cached=self.cached,
        )
        logger.info("rescore: item %s of v%s: %s", self.taken.item_id, self.version, outcome)
        return outcome


def _item_score(
    *, rescore_id: int, renewer: rescore_takes.Renewer | None, yield_to_jobs: bool
) -> _Scored | str:
    """Take and score one item (its lease renewed by the chain's `renewer` meanwhile); `idle`
    when none is free, `interrupted` when the worker is stopping (the item was given back),
    JOB_WAITING when `yield_to_jobs` and a job is queued (PostgreSQL: nothing taken)."""
    taken = _item_take(rescore_id=rescore_id, yield_to_jobs=yield_to_jobs)
    if taken is None:
        return "idle"
    if isinstance(taken, str):
        return taken
    entry = taken.entry
    if entry is None and taken.of_entry:
        entry = entry_item_load(item_id=taken.item_id)
    item = None
    if entry is None:
        item = rescore_item_load(item_id=taken.item_id, of_entry=taken.of_entry)
    version = item.rescore.version if item is not None else entry.version if entry else 0
    if renewer is not None:
        renewer.watch(taken.item_id, taken.token)
    result: GradingResult | None = None
    cached: RescorePlan | None = None
    try:
        with interruptible():
            if entry is not None:
                result, cached = entry_item_score(entry)
            elif item is not None:
                result, cached = _score(item, version)
    except WorkerStopping:
        pass  # given back below, once the renewer no longer renews the lease
    except Exception as exc:
        logger.exception("rescore: scoring item %s raised", taken.item_id)
        result = _failed(f"The scorer could not be run: {type(exc).__name__}: {exc}")
    finally:
        if renewer is not None:
            renewer.unwatch()
    if result is None:
        _give_back(taken)
        return "interrupted"
    write = entry_item_write(entry, cached) if entry is not None else None
    if item is not None:
        write = _item_write(item, version, cached)
    assert write is not None  # noqa: S101 - one of the two was loaded
    return _Scored(taken, result, write, version, entry, cached)


def _go_on(*, scored: int, started: float) -> bool:
    """Whether the chain's task scores another item itself: fewer than RESCORE_BATCH so far,
    well within the task's time limit (an item lasts at most a lease, and Q_TIMEOUT exceeds
    two), and no job queued for a worker (a new submission waits for one item at most; on
    PostgreSQL the next take asks, in its own round trip)."""
    if scored >= max(1, int(settings.RESCORE_BATCH)) or worker_stopping():
        return False
    if time.monotonic() - started >= float(settings.GRADING_TIMEOUT):
        return False
    return rescore_takes.fast() or not jobs_waiting()


def _chains_enough(*, rescore_id: int) -> bool:
    """Whether RESCORE_WORKERS chains already hold live leases of the rescore's items (a
    chain holds up to two: `rescore_overlap`; its tokens share the worker's tag). A chain
    started on top of them (one per result that gets an item while the rescore runs,
    `rescore_entry_add`) then ends at once: the working chains take its item, and new
    submissions keep their worker."""
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    row = _LEASED.fetchone([rescore_takes.TAG_LENGTH, rescore_id, _PROCESSING, now])
    return row is not None and int(row[0]) >= rescore_workers()


def rescore_next(*, rescore_id: int) -> str:
    """Score open items of the rescore, then go on (see the module docstring). Returns
    `idle` (nothing free), `enough` (RESCORE_WORKERS other chains are at work), `done`,
    `failed` or `lease_lost` (the last item's outcome); a
    worker that is stopping (SIGTERM, `apps.core.cluster`) gives the item back and enqueues
    the chain again (`interrupted`, or `requeued` when it had not started)."""
    if worker_stopping():
        rescore_chains_enqueue(rescore_id=rescore_id, chains=1)
        worker_leave()
        return "requeued"
    if _chains_enough(rescore_id=rescore_id):
        return "enough"
    recorder = Recorder()
    # One renewer per chain; none inside a transaction the caller holds (its thread would not
    # see the leases).
    renewer = None if connection.in_atomic_block else rescore_takes.Renewer()
    try:
        return _chain(rescore_id=rescore_id, recorder=recorder, renewer=renewer)
    finally:
        if renewer is not None:
            renewer.close()
        recorder.close()


def _chain(*, rescore_id: int, recorder: Recorder, renewer: rescore_takes.Renewer | None) -> str:
    """Items scored one at a time, each recorded while the next one is scored."""
    started = time.monotonic()
    scored = 0
    while True:
        item = _item_score(rescore_id=rescore_id, renewer=renewer, yield_to_jobs=scored > 0)
        if item == rescore_takes.JOB_WAITING:
            break  # as `_go_on` would have: the job gets this worker
        if isinstance(item, str):
            recorder.wait()  # the last record, before the switch or the next chain
            if item == "idle":
                rescore_switch_if_complete(rescore_id=rescore_id)
            else:
                rescore_chains_enqueue(rescore_id=rescore_id, chains=1)
                worker_leave()
            return item
        recorder.submit(item.record)
        scored += 1
        if not _go_on(scored=scored, started=started):
            break
    outcome = recorder.wait() or "done"
    rescore_switch_if_complete(rescore_id=rescore_id)
    rescore_chains_enqueue(rescore_id=rescore_id, chains=1)
    return outcome


def rescores_reap(*, now: dt.datetime | None = None) -> int:
    """Start the chains of every live rescore with open items and no chain seen working for
    a lease's length. Returns how many rescores were restarted."""
    now = now or timezone.now()
    quiet = now - dt.timedelta(seconds=grading_lease_seconds())
    restarted = 0
    for rescore in Rescore.objects.filter(state__in=LIVE):
        items = rescore.items.all()
        if not items.filter(status__in=OPEN).exists():
            if rescore.state == RescoreState.RUNNING:
                rescore_switch_if_complete(rescore_id=rescore.pk)
            continue
        if not items.filter(_expired_or_pending(now)).exists():
            continue
        working = items.filter(
            Q(status=RescoreItemStatus.PROCESSING, lease_expires_at__gte=now)
            | Q(finished_at__gte=quiet)
        ).exists()
        if not working:
            rescore_chains_enqueue(rescore_id=rescore.pk)
            restarted += 1
    return restarted
