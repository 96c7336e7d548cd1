"""The idempotency protocol of job submission: resolve, claim, bind, release a key.

Idempotency keys (per user) are claimed before any work, in a short transaction of their own:
concurrent requests with one key then see the claim and get 409
`idempotency_request_in_progress` instead of racing. The request that holds the claim creates
the job and binds the key to it in one transaction, so a key either names its one job or names
nothing. A request that fails releases its claim (no error is cached: a retry runs every check
again). `idempotent_transaction` is the protocol in one piece (claim, then the job's
transaction with the bind at its end, or the release on any failure); a request that died
leaves a claim that another request takes over after `IDEMPOTENCY_LOCK_TIMEOUT`, and the dead
one, should it wake up, can no longer bind the key. The unique constraint
`jobs_idempotencykey_user_key` is what makes the claim exclusive.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from apps.core.cleanup import CleanupReport
from apps.core.models_utils import new_hex_id
from apps.core.sql import ModelInsert, SqlStatement
from apps.jobs.exceptions import (
    IdempotencyKeyMismatch,
    IdempotencyKeyReused,
    IdempotencyRequestInProgress,
    InvalidIdempotencyKey,
)
from apps.jobs.metrics import IDEMPOTENCY_TAKEOVERS, counts_submission_refusals
from apps.jobs.models import IdempotencyKey, Job
from apps.jobs.selectors import KeyLookup, idempotency_key_lookup, key_lookup_of

logger = logging.getLogger(__name__)

MAX_KEY_LENGTH = 256

# A claim's INSERT without compiling it every time (every new key runs it).
_KEY_INSERT = ModelInsert(IdempotencyKey)
# PostgreSQL: the claim of a new key and the read of an existing one in one statement. The
# INSERT does nothing when the (user, key) row exists; the SELECT reads the table as it was
# when the statement began (it never sees the row the INSERT adds). So one part answers: the
# new claim's id, or the existing row (as `idempotency_key_lookup` reads it); neither when a
# concurrent request's claim committed while this statement waited on it.
# The claim's own commit does not wait for its WAL flush (`synchronous_commit` off for this
# statement's transaction, set by the statement itself: no extra round trip). A crash can then
# lose a claim, never a job: the job's transaction commits synchronously, and flushing its
# commit record flushes every earlier record, the claim's included; a lost claim only lets a
# retry claim the key afresh (docs/decisions.md).
_CLAIM_OR_READ = SqlStatement(
    "WITH ins AS (INSERT INTO {k} ({k.user}, {k.key}, {k.fingerprint}, {k.lock_token},"
    " {k.locked_at}, {k.created_at}, {k.expires_at}) VALUES (%s, %s, %s, %s, %s, %s, %s)"
    " ON CONFLICT DO NOTHING RETURNING {k.id}),"
    " nosync AS (SELECT set_config('synchronous_commit', 'off', true))"
    " SELECT ins.{k.id}, NULL, NULL, NULL, NULL FROM ins, nosync UNION ALL"
    " SELECT NULL, k.{k.fingerprint}, k.{k.expires_at} > %s, k.{k.job}, j.{j.status} FROM {k} k"
    " LEFT JOIN {j} j ON j.{j.id} = k.{k.job} WHERE k.{k.user} = %s AND k.{k.key} = %s",
    k=IdempotencyKey,
    j=Job,
)
# Raw SQL on purpose (once per new job with a key): the ORM spent about twice as long compiling
# this compare-and-set as the database spent running it (docs/benchmarks.md, raw SQL).
_BIND = SqlStatement(
    "UPDATE {k} SET {k.job} = %s, {k.lock_token} = '', {k.locked_at} = NULL, {k.expires_at} = %s"
    " WHERE {k.id} = %s AND {k.lock_token} = %s AND {k.job} IS NULL",
    k=IdempotencyKey,
)


@counts_submission_refusals
def idempotency_key_resolve(*, body_key: str | None, header_key: str | None) -> str | None:
    """The request's key from the body or the `Idempotency-Key` header (None: no key).

    Raises IdempotencyKeyMismatch when both are given and differ, InvalidIdempotencyKey unless
    the key is 1-256 printable ASCII characters without whitespace.
    """
    if body_key is not None and header_key is not None and body_key != header_key:
        raise IdempotencyKeyMismatch()
    key = body_key if body_key is not None else header_key
    if key is None:
        return None
    if not 1 <= len(key) <= MAX_KEY_LENGTH or any(not "!" <= ch <= "~" for ch in key):
        raise InvalidIdempotencyKey()
    if "," in key:
        # HTTP servers join repeated header lines with commas: `k1,k2` is two keys, never one.
        raise InvalidIdempotencyKey(
            "An idempotency key cannot contain a comma (two Idempotency-Key header lines are "
            "joined by a comma): send exactly one key."
        )
    return key


def idempotency_retry_after(*, locked_at: dt.datetime | None, now: dt.datetime) -> int:
    """Seconds a client should wait before retrying a key that another request holds.

    The holder usually finishes within a second or two, so the hint is a short poll
    (IDEMPOTENCY_LOCK_TIMEOUT / 30, at least 1 s: 2 s by default), never later than the moment
    the claim could be taken over (`locked_at` + IDEMPOTENCY_LOCK_TIMEOUT), when a retry is
    sure to get an answer.
    """
    timeout = float(settings.IDEMPOTENCY_LOCK_TIMEOUT)
    poll = max(1, math.ceil(timeout / 30))
    if locked_at is None:
        return poll
    remaining = math.ceil((locked_at + dt.timedelta(seconds=timeout) - now).total_seconds())
    return max(1, min(poll, remaining))


def idempotency_fingerprint(
    *, submission_id: str, config: dict[str, Any], reservation_id: str | None
) -> str:
    """sha256 of the canonical JSON of the payload a key is bound to."""
    canonical = json.dumps(
        {
            "submission_id": submission_id,
            "config": config,
            "reservation_id": reservation_id or None,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class IdempotencyClaim:
    """Either the job a finished key names (`replay`) or a claim this request now holds."""

    key_id: int = 0
    token: str = ""
    replay: Job | None = None


def _claim_or_replay(row: IdempotencyKey, attempt: _ClaimAttempt) -> IdempotencyClaim:
    """Decide on an existing (locked) key row: replay, refuse, or take it over."""
    fingerprint, token, now, expires = (
        attempt.fingerprint,
        attempt.token,
        attempt.now,
        attempt.expires,
    )
    if row.expires_at <= now:
        # Past its TTL the key is free: the same key now makes a new job.
        IdempotencyKey.objects.filter(pk=row.pk).update(
            fingerprint=fingerprint,
            job=None,
            lock_token=token,
            locked_at=now,
            created_at=now,
            expires_at=expires,
        )
        return IdempotencyClaim(key_id=row.pk, token=token)
    if row.fingerprint != fingerprint:
        raise IdempotencyKeyReused()
    if row.job is not None:
        return IdempotencyClaim(replay=row.job)
    lock_timeout = dt.timedelta(seconds=float(settings.IDEMPOTENCY_LOCK_TIMEOUT))
    if row.locked_at is not None and row.locked_at > now - lock_timeout:
        raise IdempotencyRequestInProgress(
            retry_after=idempotency_retry_after(locked_at=row.locked_at, now=now)
        )
    # The claim's request died (or overran the lock timeout): take it over. Compare-and-set on
    # the old token, so of two requests taking over one dead claim only one succeeds.
    taken = IdempotencyKey.objects.filter(
        pk=row.pk, lock_token=row.lock_token, job__isnull=True
    ).update(lock_token=token, locked_at=now, expires_at=expires)
    if taken != 1:
        # Another request took it over a moment ago: its claim is fresh.
        raise IdempotencyRequestInProgress(
            retry_after=idempotency_retry_after(locked_at=now, now=now)
        )
    logger.warning("idempotency key %s of user %s: stale claim taken over", row.pk, row.user_id)
    IDEMPOTENCY_TAKEOVERS.inc()
    return IdempotencyClaim(key_id=row.pk, token=token)


def idempotency_claim(
    *, user: AbstractBaseUser, key: str, fingerprint: str, ttl_hours: float
) -> IdempotencyClaim:
    """Claim `key` for this request, or return the job it already names.

    Must not be called inside another transaction: the claim is committed before any work
    starts, so concurrent requests with the key see it. A new key is claimed by one INSERT
    (the (user, key) unique constraint decides between racing requests); a finished key is
    answered from a plain read, so replays never queue on a lock (on PostgreSQL the INSERT and
    the read are one statement, `_CLAIM_OR_READ`); everything else (a live or
    dead claim, an expired key, a lost insert race) is decided on the locked key row. Raises
    IdempotencyKeyReused (the key names another payload) or IdempotencyRequestInProgress (a
    live claim holds it).
    """
    now = timezone.now()
    attempt = _ClaimAttempt(
        user=user,
        key=key,
        fingerprint=fingerprint,
        token=new_hex_id(),
        now=now,
        expires=now + dt.timedelta(hours=ttl_hours),
    )
    if connection.vendor == "postgresql":
        claimed, existing = _idempotency_claim_or_read(attempt)
        if claimed is not None:
            return claimed
    else:
        existing = idempotency_key_lookup(user_id=int(user.pk), key=key, now=now)
        if existing is None:
            try:
                return _idempotency_claim_insert(attempt)
            except IntegrityError:
                # Another request inserted the key first: decide on its row.
                return _idempotency_claim_locked(attempt)
    if existing is not None and existing.job is not None and existing.live:
        if existing.fingerprint != fingerprint:
            raise IdempotencyKeyReused()
        return IdempotencyClaim(replay=existing.job)
    # A live or dead claim, an expired key, or (PostgreSQL) a claim committed meanwhile.
    return _idempotency_claim_locked(attempt)


@dataclass(frozen=True)
class _ClaimAttempt:
    """One request's attempt at claiming a key: who, which key and payload, its token, when."""

    user: AbstractBaseUser
    key: str
    fingerprint: str
    token: str
    now: dt.datetime
    expires: dt.datetime


def _idempotency_claim_or_read(
    attempt: _ClaimAttempt,
) -> tuple[IdempotencyClaim | None, KeyLookup | None]:
    """PostgreSQL: one statement (`_CLAIM_OR_READ`): the new claim, else the existing row
    (None, None: a concurrent claim committed meanwhile, decided on the locked row)."""
    adapt = connection.ops.adapt_datetimefield_value
    user_id, now = attempt.user.pk, adapt(attempt.now)
    inserted = [
        *(user_id, attempt.key, attempt.fingerprint, attempt.token),
        *(now, now, adapt(attempt.expires)),
    ]
    row = _CLAIM_OR_READ.fetchone([*inserted, now, user_id, attempt.key])
    if row is None:
        return None, None
    if row[0] is not None:
        return IdempotencyClaim(key_id=int(row[0]), token=attempt.token), None
    return None, key_lookup_of(row[1:])


def _idempotency_claim_insert(attempt: _ClaimAttempt) -> IdempotencyClaim:
    """The one INSERT of a new claim; IntegrityError (in its own savepoint when inside a
    transaction) when the (user, key) row exists already."""
    with transaction.atomic() if connection.in_atomic_block else nullcontext():
        created = IdempotencyKey(
            user_id=attempt.user.pk,
            key=attempt.key,
            fingerprint=attempt.fingerprint,
            lock_token=attempt.token,
            locked_at=attempt.now,
            created_at=attempt.now,
            expires_at=attempt.expires,
        )
        _KEY_INSERT.save(created)
    return IdempotencyClaim(key_id=int(created.pk), token=attempt.token)


def _idempotency_claim_locked(attempt: _ClaimAttempt) -> IdempotencyClaim:
    with transaction.atomic():
        row = (
            IdempotencyKey.objects.select_for_update(of=("self",))
            .select_related("job")
            .filter(user_id=attempt.user.pk, key=attempt.key)
            .first()
        )
        if row is not None:
            return _claim_or_replay(row, attempt)
        # The row we saw was released (its request failed) meanwhile: claim it afresh.
        try:
            return _idempotency_claim_insert(attempt)
        except IntegrityError as exc:
            raise IdempotencyRequestInProgress(
                retry_after=idempotency_retry_after(locked_at=attempt.now, now=attempt.now)
            ) from exc


def _bind_params(*, claim: IdempotencyClaim, job: Job, ttl_hours: float) -> list[Any]:
    expires = timezone.now() + dt.timedelta(hours=ttl_hours)
    return [job.pk, connection.ops.adapt_datetimefield_value(expires), claim.key_id, claim.token]


def _taken_over() -> IdempotencyRequestInProgress:
    now = timezone.now()
    return IdempotencyRequestInProgress(
        "This request took too long and another request with the same idempotency key "
        "took over; retry to get its result.",
        retry_after=idempotency_retry_after(locked_at=None, now=now),
    )


def idempotency_bind(*, claim: IdempotencyClaim, job: Job, ttl_hours: float) -> None:
    """Bind the claimed key to `job`, in the job's transaction, only while still holding it.

    If the claim was taken over (this request overran `IDEMPOTENCY_LOCK_TIMEOUT`), raises
    IdempotencyRequestInProgress, which rolls the job back: a key never names two jobs.
    """
    if _BIND.rowcount(_bind_params(claim=claim, job=job, ttl_hours=ttl_hours)) != 1:
        raise _taken_over()


def idempotency_release(*, claim: IdempotencyClaim) -> None:
    """Give up a claim this request still holds, so a retry with the key runs again."""
    IdempotencyKey.objects.filter(
        pk=claim.key_id, lock_token=claim.token, job__isnull=True
    ).delete()


@dataclass
class IdempotentWork:
    """What `idempotent_transaction` yields: the job a finished key names (`replay`: do
    nothing, answer it), else a transaction to run, whose job the body inserts with
    `job_insert` (the key is bound to it then, or at the end of the transaction)."""

    replay: Job | None = None
    job: Job | None = None
    claim: IdempotencyClaim | None = None
    ttl_hours: float = 0
    bound: bool = False

    def key_bind(self, job: Job) -> tuple[str, list[Any]] | None:
        """PostgreSQL with a claimed key: the bind of the key to the new `job` (`_BIND`'s
        template and parameters), for the statement that inserts the job to run as well, so
        that both are one round trip; None otherwise (the key is bound at the end of the
        transaction). The caller reports the bind's row count to `job_inserted`."""
        if self.claim is None or connection.vendor != "postgresql":
            return None
        return _BIND.template, _bind_params(claim=self.claim, job=job, ttl_hours=self.ttl_hours)

    def job_inserted(self, job: Job, bound: int | None) -> None:
        """The body inserted `job`, the work's job; `bound` is the row count of the key's bind
        run by that INSERT (None: not run there). IdempotencyRequestInProgress, rolling the
        job back, when the claim was taken over meanwhile."""
        if bound is not None:
            if bound != 1:
                raise _taken_over()
            self.bound = True
        self.job = job

    def job_insert(self, job: Job, insert: ModelInsert) -> None:
        """Insert the body's new `job` (with `insert`, a `ModelInsert(Job)`), binding the
        claimed key in the same statement where it can (`key_bind`)."""
        bind = self.key_bind(job)
        if bind is None:
            insert.save(job)
            self.job_inserted(job, None)
        else:
            self.job_inserted(job, insert.save_with(job, _BIND, bind[1]))


@contextmanager
def idempotent_transaction(
    *, user: AbstractBaseUser, key: str | None, fingerprint: str, ttl_hours: float
) -> Iterator[IdempotentWork]:
    """Claim `key`, run the body in one transaction and bind the key to the body's job at the
    end of that transaction; on any failure roll back and release the claim.

    The claim is committed on its own before the body runs (`idempotency_claim`: it raises
    IdempotencyKeyReused or IdempotencyRequestInProgress). A finished key yields its job as
    `replay` and opens no transaction. Otherwise the body runs inside `transaction.atomic()`
    and inserts its job with `work.job_insert` (or sets `work.job`); the key is bound to it
    by compare-and-set on the claim's token in the same transaction, in the job's INSERT on
    PostgreSQL (IdempotencyRequestInProgress, rolling the job back, when the claim was taken
    over meanwhile). Any exception leaving the block, the bind's included, rolls the
    transaction back and releases the claim (a retry runs every check again). Without a key
    (`None`) it is only the transaction. Must not be called inside a transaction.
    """
    claim = None
    if key is not None:
        claim = idempotency_claim(user=user, key=key, fingerprint=fingerprint, ttl_hours=ttl_hours)
        if claim.replay is not None:
            yield IdempotentWork(replay=claim.replay)
            return
    work = IdempotentWork(claim=claim, ttl_hours=ttl_hours)
    try:
        with transaction.atomic():
            yield work
            if claim is not None and not work.bound:
                if work.job is None:
                    raise RuntimeError("an idempotent transaction ended without its job")
                idempotency_bind(claim=claim, job=work.job, ttl_hours=ttl_hours)
    except BaseException:
        if claim is not None:
            idempotency_release(claim=claim)
        raise


def idempotency_keys_purge(*, now: dt.datetime, dry_run: bool = False) -> CleanupReport:
    """Cleanup kind `keys`: delete idempotency keys past their TTL and claims older than
    IDEMPOTENCY_LOCK_TIMEOUT that never bound a job (their request died).

    An expired key is ignored at lookup; a dead claim would be taken over by the next request:
    removing either changes no answer. A dead request that wakes up after its claim was
    removed cannot bind the key (its token is gone) and rolls back. The DELETE repeats the
    condition, so a key renewed meanwhile is kept. `dry_run` lists and deletes nothing.
    """
    lock_timeout = dt.timedelta(seconds=float(settings.IDEMPOTENCY_LOCK_TIMEOUT))
    stale_q = Q(expires_at__lte=now) | Q(job__isnull=True, locked_at__lte=now - lock_timeout)
    rows = list(IdempotencyKey.objects.filter(stale_q).values_list("pk", "user_id", "key"))
    if not dry_run:
        IdempotencyKey.objects.filter(stale_q, pk__in=[pk for pk, _, _ in rows]).delete()
    items = [f"user {user_id}: {key}" for _, user_id, key in rows]
    return CleanupReport(kind="keys", count=len(items), items=items)
