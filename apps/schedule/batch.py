"""Bursts: plans due at the same moment, run side by side on a worker's persistent threads.

A batch is started with one UPDATE and one SELECT in the worker's own thread; then each plan's
webhook call and outcome (three statements) run on a pool thread. A django-q2 worker process
keeps one pool of BATCH_THREADS threads for its whole life (made again after a fork). Each
thread keeps its own database connection from plan to plan and, like a request in Django,
checks it before each plan with `close_old_connections()`: only a broken, obsolete (older than
CONN_MAX_AGE) or mid-transaction connection is closed and reopened. The webhook calls share the
process's pooled HTTP client (keep-alive per host). `plan_executor_shutdown()` ends the threads
and closes their connections (tests, a clean process exit).

Fairness: a worker process runs one django-q2 task at a time, so at most BATCH_THREADS plans
run at once per process; each attempt ends within SCHEDULE_ACTION_MAX_SECONDS however slowly
its receiver answers, and a batch hands its plans to the threads round-robin by owner, so one
owner's many slow plans never queue ahead of the other owners' plans of the batch.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial

from django.db import close_old_connections, connections

from apps.schedule.execution.executor import plan_run, plans_start
from apps.schedule.models import Plan

logger = logging.getLogger(__name__)
BATCH_THREADS = 4  # 4 workers x 4 threads beat x 8 on 2 cores: less GIL and fewer connections

_Job = tuple[Callable[[], str], "Future[str]"] | None


class _ExecutorPool:
    """A fixed set of threads that keep their database connections between jobs.

    Not `ThreadPoolExecutor`: its threads have no exit hook, and each of these must close its
    own (thread-local) database connection when the pool shuts down, or a test database could
    not be dropped and a worker would leave its PostgreSQL sessions to time out."""

    def __init__(self, size: int) -> None:
        self.pid = os.getpid()
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.threads = [
            threading.Thread(target=self._loop, name=f"plan-exec-{i}", daemon=True)
            for i in range(size)
        ]
        for thread in self.threads:
            thread.start()

    def submit(self, fn: Callable[[], str]) -> Future[str]:
        future: Future[str] = Future()
        self.jobs.put((fn, future))
        return future

    def _loop(self) -> None:
        try:
            while True:
                job = self.jobs.get()
                if job is None:
                    return
                fn, future = job
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    close_old_connections()
                    future.set_result(fn())
                except BaseException as exc:
                    future.set_exception(exc)
        finally:
            connections.close_all()

    def shutdown(self) -> None:
        for _ in self.threads:
            self.jobs.put(None)
        for thread in self.threads:
            thread.join(timeout=10)


_POOL: _ExecutorPool | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> _ExecutorPool:
    """This process's pool; a pool inherited through a fork has no threads here, so a child
    makes its own."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL.pid != os.getpid():
            _POOL = _ExecutorPool(BATCH_THREADS)
        return _POOL


def plan_executor_shutdown() -> None:
    """Stop this process's plan threads and close their database connections."""
    global _POOL
    with _POOL_LOCK:
        pool, _POOL = _POOL, None
    if pool is not None and pool.pid == os.getpid():
        pool.shutdown()


def _fair_order(started: dict[int, Plan]) -> list[Plan]:
    """The plans round-robin by owner (in their order within each owner): the pool's threads
    take them first come, first served, so one owner's many plans never queue ahead of
    everyone else's; each owner gets a thread in the first round."""
    by_owner: dict[int, list[Plan]] = {}
    for plan in started.values():
        by_owner.setdefault(plan.life.owner_id, []).append(plan)
    queues = list(by_owner.values())
    order: list[Plan] = []
    while queues:
        order.extend(queue.pop(0) for queue in queues)
        queues = [queue for queue in queues if queue]
    return order


def plan_execute_batch(*, items: list[tuple[int, str]]) -> list[str]:
    """Deliver several armed plans ((plan_id, arm token) pairs) due at the same moment: start
    them all with one UPDATE and one SELECT (`plans_start`, in the calling thread), then run
    the started ones up to BATCH_THREADS at once on this process's persistent threads, taken
    round-robin by owner (`_fair_order`); each attempt ends within SCHEDULE_ACTION_MAX_SECONDS
    (`transport.send`), so a slow receiver holds a thread at most that long per attempt. Same
    exactly-once guarantee per plan ("skipped" for a plan another delivery runs); a plan that
    raises is logged and reported as "error"."""
    started = plans_start(items=items)
    if len(started) <= 1:
        return [plan_run(started[pid]) if pid in started else "skipped" for pid, _ in items]
    pool = _pool()
    futures = {plan.pk: pool.submit(partial(plan_run, plan)) for plan in _fair_order(started)}
    results = []
    for plan_id, _ in items:
        future = futures.get(plan_id)
        if future is None:
            results.append("skipped")
            continue
        try:
            results.append(future.result())
        except Exception:
            logger.exception("plan %s failed to execute", plan_id)
            results.append("error")
    return results
