"""The watcher's own delivery of fired plans: a bounded pool of threads in the watcher process.

Plans fired by the watcher's timers are delivered here instead of through django-q2 when
PLAN_DELIVERY is "watcher" (the default), so a plan never waits behind gradings in the shared
task queue. Each thread runs the same idempotent services as the django-q2 task
(`plans_start`: the compare-and-set Preset(arm token) → Running, then `plan_run`), keeps its
own database connection from plan to plan (checked before each with `close_old_connections()`)
and closes it when the pool stops.

A plan waiting for a thread is still Preset under the watcher's claim, and the watcher keeps
renewing that claim: if the watcher dies, the claim ends after its lease and another watcher
(or the every-minute fallback) arms the plan again. A plan a killed watcher was attempting is
Running; it is delivered again, under the same webhook-id, once its attempt is certainly over
(`plans_running_abandoned`). So delivery stays at least once, one webhook-id per plan.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection, connections

from apps.schedule.execution.executor import plan_run, plans_start
from apps.schedule.models import Plan
from apps.schedule.task_runs import action_topic_call, task_run_execute_keyed
from apps.schedule.transport import http_client_ready

logger = logging.getLogger(__name__)

WATCHER = "watcher"
QUEUE = "queue"
MODES = (WATCHER, QUEUE)
# Seconds ahead of its time a plan is handed to a thread of the pool: enough for the start's
# compare-and-set, the request's preparation and its connection under load (in a burst of load
# on the 2-core machine the start alone took up to 0.25 s), so that the request leaves at the
# plan's time. The plan is Running (a DELETE gets 409 plan_started) that much early.
FIRE_LEAD = 0.3

# (plan id, arm token, the plan's time as a `time.time()`, or None to send at once)
Item = tuple[int, str, float | None]


def delivery_mode() -> str:
    """PLAN_DELIVERY: "watcher" (the watcher's own threads) or "queue" (django-q2 workers)."""
    mode = str(getattr(settings, "PLAN_DELIVERY", WATCHER)).strip().lower()
    return mode if mode in MODES else WATCHER


def plan_deliver(*, plan_id: int, token: str, not_before: float | None = None) -> str:
    """Deliver one armed plan in this thread: start it (CAS Preset(token) → Running), make its
    attempt and record it (`plan_run`), exactly as the django-q2 task `plan_execute` does.
    Idempotent: a stale or duplicate delivery starts nothing and returns "skipped".

    The watcher hands a plan over FIRE_LEAD seconds ahead of its time: the start (the
    compare-and-set) and the request's preparation are done by then, and the request is sent
    at `not_before`, the plan's time.

    When the attempt was a task-topic call the platform accepted, the handler of that call
    (keyed by the plan's webhook-id) is run here too, at once, rather than when a django-q2
    worker reaches its task; the worker's run of it then finds it done (`task_run_execute`)."""
    plan = plans_start(items=[(plan_id, token)]).get(plan_id)
    if plan is None:
        return "skipped"
    result = plan_run(plan, not_before=not_before)
    if result == "done":
        _topic_call_now(plan)
    return result


def delivery_thread_ready() -> None:
    """A pool thread starting: its database connection and the process's HTTP client (its TLS
    context) are made now, not in the lead time of its first plan, where they made the first
    plans after a watcher's start tens to hundreds of milliseconds late on a busy machine."""
    http_client_ready()
    try:
        connection.ensure_connection()
    except DatabaseError:
        logger.warning("a delivery thread could not connect yet; its first plan will")


def _topic_call_now(plan: Plan) -> None:
    try:
        if action_topic_call(plan.action) is None:
            return
        task_run_execute_keyed(key=plan.webhook_id)
    except Exception:
        # The django-q2 task the endpoint enqueued still runs it.
        logger.exception("plan %s: its topic call's handler failed here", plan.pk)


class DeliveryPool:
    """`size` threads taking (plan id, arm token) items first come, first served.

    `waiting()` counts the items not yet taken by a thread: the watcher hands over no more
    while TIMEDOUT_QUEUE_MAX_SIZE wait. `on_done(plan_id, token)` is called (in the thread)
    once a plan's delivery is over, whatever its result; `ready()` once by each thread as it
    starts, before it takes anything."""

    def __init__(
        self,
        size: int,
        *,
        deliver: Callable[..., str] = plan_deliver,
        on_done: Callable[[int, str], None] | None = None,
        ready: Callable[[], None] | None = None,
    ) -> None:
        self.deliver = deliver
        self.on_done = on_done
        self.ready = ready
        self.jobs: queue.Queue[Item | None] = queue.Queue()
        self.lock = threading.Lock()
        self.running: dict[int, str] = {}
        self.delivered = 0
        self.threads = [
            threading.Thread(target=self._loop, name=f"plan-deliver-{i}", daemon=True)
            for i in range(max(int(size), 1))
        ]
        for thread in self.threads:
            thread.start()

    def submit(self, items: Sequence[Item]) -> None:
        for item in items:
            self.jobs.put(item)

    def waiting(self) -> int:
        return self.jobs.qsize()

    def busy(self) -> int:
        with self.lock:
            return len(self.running)

    def _loop(self) -> None:
        try:
            if self.ready is not None:
                try:
                    self.ready()
                except Exception:
                    logger.exception("a delivery thread could not get ready; it goes on")
            while True:
                item = self.jobs.get()
                if item is None:
                    return
                plan_id, token, not_before = item
                with self.lock:
                    self.running[plan_id] = token
                try:
                    close_old_connections()
                    self.deliver(plan_id=plan_id, token=token, not_before=not_before)
                except Exception:
                    logger.exception("plan %s failed to deliver", plan_id)
                finally:
                    with self.lock:
                        self.running.pop(plan_id, None)
                        self.delivered += 1
                    if self.on_done is not None:
                        self.on_done(plan_id, token)
        finally:
            connections.close_all()

    def take_waiting(self) -> list[Item]:
        """Remove and return the items no thread has taken yet (a stopping watcher gives their
        claims back)."""
        taken: list[Item] = []
        while True:
            try:
                item = self.jobs.get_nowait()
            except queue.Empty:
                return taken
            if item is not None:
                taken.append(item)

    def shutdown(self, *, grace: float) -> list[Item]:
        """Stop: return the items not yet taken, let the attempts in progress end within
        `grace` seconds (each thread then closes its connection); an attempt still running
        after that is left to the redelivery of abandoned plans."""
        left = self.take_waiting()
        for _ in self.threads:
            self.jobs.put(None)
        deadline = time.monotonic() + grace
        for thread in self.threads:
            thread.join(timeout=max(deadline - time.monotonic(), 0.0))
        return left
