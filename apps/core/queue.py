"""Handing tasks to django-q2: every task's dotted path, the broker this process enqueues with
(built once), and the three ways to enqueue.

Every enqueue in the product goes through this module: `enqueue_on_commit` from a service (the
task is handed over once the transaction commits), `enqueue_in_transaction` on the job
submission path (the ORM broker's queue row commits with the work), `enqueue` from a process
loop outside any transaction (the plan watcher). The dotted paths below are the only place a
task is named; periodic schedules (`apps.core.schedules`) name their tasks with them too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.core.metrics import TASK_ENQUEUE_FAILURES

logger = logging.getLogger(__name__)

# --- Task names: the dotted path django-q2 imports in the worker -------------------------------
GRADE_JOB = "apps.grading.tasks.grade_job"
REAP_EXPIRED_LEASES = "apps.grading.tasks.reap_expired_leases"
CLEANUP = "apps.core.tasks.cleanup_periodic"
PLAN_EXECUTE = "apps.schedule.tasks.plan_execute"
PLAN_EXECUTE_MANY = "apps.schedule.tasks.plan_execute_many"
PLANS_FIRE_DUE = "apps.schedule.tasks.watcher_pass_periodic"
TASK_RUN = "apps.schedule.tasks.task_run"
BASELINE_SCORE = "apps.benchmarks.tasks.baseline_score"
PHASES_REVEAL_OVERDUE = "apps.benchmarks.reveal_tasks.phases_reveal_overdue_periodic"
RESCORE_NEXT = "apps.benchmarks.tasks.rescore_next"
RESCORES_REAP = "apps.benchmarks.tasks.rescores_reap_periodic"

TASKS = (
    GRADE_JOB,
    REAP_EXPIRED_LEASES,
    CLEANUP,
    PLAN_EXECUTE,
    PLAN_EXECUTE_MANY,
    PLANS_FIRE_DUE,
    TASK_RUN,
    BASELINE_SCORE,
    PHASES_REVEAL_OVERDUE,
    RESCORE_NEXT,
    RESCORES_REAP,
)
# Every task's failure counter exists at 0 in each process that can enqueue, so rates and
# alerts on it see 0 before the first failure.
for _task in TASKS:
    TASK_ENQUEUE_FAILURES.labels(_task)


@cache
def task_broker() -> Any:
    """The configured django-q2 broker, one per process, to pass as `async_task(broker=...)`.

    Without it `async_task` builds a broker for every task: with Redis a new client and
    connection pool, so a TCP connect per enqueue. The ORM broker is replaced by one that
    inserts into the queue table as is: django-q2's own calls `close_old_connections()` before
    every use (right for the cluster's long-lived broker thread), which makes Django
    health-check the connection with an extra `SELECT 1` round trip before the INSERT; a
    request or a task already has its connection managed. Both are safe to share between
    threads (Redis clients pool their connections; the ORM broker uses each thread's own
    database connection).
    """
    from django_q.brokers import get_broker
    from django_q.brokers.orm import ORM
    from django_q.conf import Conf
    from django_q.models import OrmQ

    from apps.core.sql import ModelInsert

    insert = ModelInsert(OrmQ)

    class EnqueueOrm(ORM):
        @staticmethod
        def get_connection(list_key: str | None = None) -> Any:
            return OrmQ.objects.using(Conf.ORM)

        def enqueue(self, task: Any) -> Any:
            # The INSERT of django-q2's own `enqueue`, without compiling it every time.
            package = OrmQ(
                key=self.list_key or Conf.CLUSTER_NAME, payload=task, lock=timezone.now()
            )
            insert.save(package, using=Conf.ORM)
            return package.pk

    broker = get_broker()
    if type(broker) is ORM:
        return EnqueueOrm(list_key=broker.list_key)
    return broker


@dataclass(frozen=True)
class TaskEnqueue:
    """Enqueue the django-q2 task `task(*args)`; registered with `transaction.on_commit`.

    `robust` (the default): a broker that refuses the task (down, unreachable) is logged and
    swallowed. By then the work it names is committed, so failing the request would invite a
    client to retry what already happened; the work is found again by its app's reaper (e.g.
    `grading_reap_expired`, an expired plan lease). Not robust: logged, then raised, for work
    that only a retry of the request itself can recover. A plain object rather than a
    `partial`, so that the task and its arguments are named in logs and visible to tests.
    """

    task: str
    args: tuple[Any, ...] = ()
    robust: bool = True

    def __call__(self) -> None:
        try:
            enqueue(self.task, *self.args)
        except Exception:
            if not self.robust:
                raise


def enqueue(task: str, *args: Any) -> None:
    """Enqueue `task(*args)` now, through the process's broker. A refusal is logged, counted
    (`yoyaku_task_enqueue_failures_total`) and raised: the caller keeps the work to retry."""
    from django_q.tasks import async_task

    if task not in TASKS:
        raise ValueError(f"{task!r} is not a task of apps.core.queue.TASKS")
    try:
        async_task(task, *args, broker=task_broker())
    except Exception:
        logger.exception("Could not enqueue %s%r.", task, args)
        TASK_ENQUEUE_FAILURES.labels(task).inc()
        raise


def enqueue_on_commit(task: str, *args: Any, robust: bool = True) -> None:
    """Enqueue `task(*args)` once the current transaction commits (at once outside one)."""
    if task not in TASKS:
        raise ValueError(f"{task!r} is not a task of apps.core.queue.TASKS")
    transaction.on_commit(TaskEnqueue(task, args, robust=robust))


def _queue_row_in_transaction_now() -> bool:
    """Whether `enqueue_in_transaction` inserts the ORM broker's queue row now: inside a
    transaction on the broker's own database."""
    from django_q.brokers.orm import ORM
    from django_q.conf import Conf

    connection = transaction.get_connection()
    return bool(
        connection.in_atomic_block
        and connection.alias == Conf.ORM
        and isinstance(task_broker(), ORM)
    )


def enqueue_in_transaction(task: str, *args: Any) -> None:
    """Enqueue `task(*args)` with the current transaction's work.

    With the ORM broker on the transaction's own database the queue row is inserted now,
    inside the transaction: it commits with the work or not at all, and the request pays one
    commit instead of two (the queue row's own autocommit). A refusal then fails the
    transaction (the database refused a write: its commit would not have fared better). Any
    other broker (Redis), or outside a transaction: `enqueue_on_commit` (robust)."""
    if _queue_row_in_transaction_now():
        enqueue(task, *args)
        return
    enqueue_on_commit(task, *args)


# The ORM broker's queue row inserted by a statement of the caller's own (`queue_row`): `{q}`
# is `queue_row_model()`, the three values are `QueueRow.params`. A SELECT, so that the caller
# can append a WHERE (e.g. only if its own INSERT inserted).
QUEUE_ROW_INSERT = "INSERT INTO {q} ({q.key}, {q.payload}, {q.lock}) SELECT %s, %s, %s"


def queue_row_model() -> Any:
    """The ORM broker's queue model (django-q2's `OrmQ`), for `QUEUE_ROW_INSERT`."""
    from django_q.models import OrmQ

    return OrmQ


@dataclass(frozen=True)
class QueueRow:
    """One task's queue row, built but not inserted: the parameters of `QUEUE_ROW_INSERT`."""

    params: tuple[Any, ...]


class _KeptPackage:
    """A broker that keeps the one signed package django-q2 hands it instead of sending it."""

    def __init__(self, list_key: str) -> None:
        self.list_key = list_key
        self.package: str | None = None

    def enqueue(self, package: str) -> str:
        self.package = package
        # What django-q2's "Enqueued [key] …" log line shows: the row is not written yet.
        return "(queue row kept for the caller's statement)"


def queue_row(task: str, *args: Any) -> QueueRow | None:
    """The queue row of `task(*args)` for the caller's own statement to insert in the current
    transaction, when `enqueue_in_transaction` would insert it now (the ORM broker on the
    transaction's database); None otherwise (then enqueue with `enqueue_in_transaction`).

    The package is django-q2's own (`async_task`: its id, name, signal and signature), and the
    row is the one the broker's `enqueue` writes (the broker's key, `lock` now). The caller
    must insert it in the transaction, or call `enqueue_in_transaction` instead.
    """
    from django_q.conf import Conf
    from django_q.tasks import async_task

    if task not in TASKS:
        raise ValueError(f"{task!r} is not a task of apps.core.queue.TASKS")
    if Conf.SYNC or not _queue_row_in_transaction_now():
        return None
    kept = _KeptPackage(task_broker().list_key or Conf.CLUSTER_NAME)
    async_task(task, *args, broker=kept)
    if kept.package is None:  # pragma: no cover - only a synchronous task skips the broker
        return None
    connection = transaction.get_connection()
    lock = connection.ops.adapt_datetimefield_value(timezone.now())
    return QueueRow(params=(kept.list_key, kept.package, lock))
