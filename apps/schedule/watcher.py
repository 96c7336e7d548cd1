"""The plan watcher process: polls, claims, arms in-process timers, delivers due plans.

One timer thread keeps a heap of armed plans and, at each plan's `due_at`, moves it to a
hand-off list; one dispatcher thread hands those plans to the watcher's own pool of
PLAN_DELIVERY_THREADS threads (`delivery`, PLAN_DELIVERY=watcher, the default) or, with
PLAN_DELIVERY=queue, to django-q2 workers as tasks; either way it never lets more than
TIMEDOUT_QUEUE_MAX_SIZE of this watcher's fired plans wait for a thread or a worker.
"""

from __future__ import annotations

import datetime as dt
import heapq
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.db import close_old_connections, connections
from django.utils import timezone

from apps.core.queue import PLAN_EXECUTE, PLAN_EXECUTE_MANY, enqueue
from apps.core.services import heartbeat_beat, heartbeat_forget
from apps.schedule.delivery import (
    FIRE_LEAD,
    WATCHER,
    DeliveryPool,
    delivery_mode,
    delivery_thread_ready,
)
from apps.schedule.execution.claims import (
    ArmedPlan,
    plan_claim,
    plan_claims_release,
    plan_invalidate_late,
    plan_leases_renew,
)
from apps.schedule.execution.executor import plans_running_abandoned
from apps.schedule.models import Plan, PlanState
from apps.schedule.selectors import WATCHER_HEARTBEAT, WATCHER_HEARTBEAT_PREFIX
from apps.schedule.services.lives import life_history_purge

logger = logging.getLogger(__name__)
HEARTBEAT_NAME = WATCHER_HEARTBEAT
PURGE_EVERY = 60.0  # seconds between history purges
BATCH_SIZE = 16  # plans fired together that share one worker task
# Seconds a stopping watcher lets its attempts in progress end (honcho waits 5 s).
SHUTDOWN_GRACE = 4.0


def watch_interval() -> float:
    return float(settings.BOOKING_PLAN_WATCH_INTERVAL) / 1000


@dataclass
class WatcherStats:
    ticks: int = 0
    armed: int = 0
    dispatched: int = 0
    invalidated: int = 0
    last_tick_ms: float = 0.0


@dataclass
class PlanWatcher:
    owner: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    stats: WatcherStats = field(default_factory=WatcherStats)

    def __post_init__(self) -> None:
        self.stop_event = threading.Event()
        self._heap: list[tuple[float, int, str]] = []
        self._known: dict[int, str] = {}
        self._dispatched: set[int] = set()
        self._cond = threading.Condition()
        self._handoff: list[tuple[int, str, float]] = []  # (plan id, token, due)
        self._handoff_cond = threading.Condition()
        self._last_purge = 0.0
        self.mode = delivery_mode()
        self.pool: DeliveryPool | None = None
        self._threads = [
            threading.Thread(target=self._timer_loop, name="plan-timers", daemon=True),
            threading.Thread(target=self._dispatch_loop, name="plan-dispatch", daemon=True),
        ]

    # --- the poll loop ---------------------------------------------------------------------
    def run(self, *, once: bool = False) -> None:
        if self.mode == WATCHER:
            self.pool = DeliveryPool(
                int(settings.PLAN_DELIVERY_THREADS),
                on_done=self._delivered,
                ready=delivery_thread_ready,
            )
        for thread in self._threads:
            thread.start()
        try:
            while not self.stop_event.is_set():
                self.tick()
                if once:
                    self._drain_due()
                    break
                self.stop_event.wait(watch_interval())
        finally:
            self.shutdown()

    def tick(self) -> None:
        started = time.monotonic()
        close_old_connections()
        now = timezone.now()
        try:
            self.stats.invalidated += plan_invalidate_late(now=now)
            with self._cond:
                held = list(self._known)
            plan_leases_renew(owner=self.owner, plan_ids=held, now=now)
            armed = plan_claim(owner=self.owner, now=now)
            self._arm(armed)
            if time.monotonic() - self._last_purge > PURGE_EVERY:
                life_history_purge(now=now)
                self._redeliver_abandoned(now)
                self._last_purge = time.monotonic()
        except Exception:
            logger.exception("watcher tick failed; retrying next interval")
        self.stats.ticks += 1
        self.stats.last_tick_ms = (time.monotonic() - started) * 1000
        detail: dict[str, object] = {
            "owner": self.owner,
            "armed": len(self._known),
            "tick_ms": self.stats.last_tick_ms,
        }
        try:
            heartbeat_beat(name=HEARTBEAT_NAME, detail=detail)
            # Its own heartbeat too: the metrics show each watcher's age.
            heartbeat_beat(name=f"{WATCHER_HEARTBEAT_PREFIX}{self.owner}", detail=detail)
        except Exception:
            logger.exception("watcher heartbeat failed")

    def _arm(self, armed: list[ArmedPlan]) -> None:
        with self._cond:
            for item in armed:
                if self._known.get(item.plan_id) == item.token:
                    continue
                self._known[item.plan_id] = item.token
                heapq.heappush(self._heap, (item.due_at.timestamp(), item.plan_id, item.token))
                self.stats.armed += 1
            self._cond.notify()

    # --- timers ----------------------------------------------------------------------------
    def _timer_loop(self) -> None:
        # The pool starts a plan FIRE_LEAD ahead and sends its request at its time; a worker
        # sends at once, so a plan goes to the queue at its time.
        lead = FIRE_LEAD if self.pool is not None else 0.0
        while not self.stop_event.is_set():
            with self._cond:
                if not self._heap:
                    self._cond.wait(0.5)
                    continue
                delay = self._heap[0][0] - lead - time.time()
                if delay > 0:
                    self._cond.wait(min(delay, 0.5))
                    continue
                due: list[tuple[int, str, float]] = []
                while self._heap and self._heap[0][0] - lead <= time.time():
                    at, plan_id, token = heapq.heappop(self._heap)
                    if self._known.get(plan_id) == token:
                        due.append((plan_id, token, at))
            with self._handoff_cond:
                self._handoff.extend(due)
                self._handoff_cond.notify()

    def _drain_due(self) -> None:
        """For `--once`: wait until everything already due has been handed over (and, on the
        watcher's own pool, delivered)."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with self._cond:
                pending_due = any(t <= time.time() for t, _, _ in self._heap)
            with self._handoff_cond:
                pending_due = pending_due or bool(self._handoff)
            if self.pool is not None:
                pending_due = pending_due or bool(self.pool.waiting() or self.pool.busy())
            if not pending_due:
                return
            time.sleep(0.02)

    # --- hand-off to the pool or to workers ------------------------------------------------
    def _dispatch_loop(self) -> None:
        try:
            while not self.stop_event.is_set():
                with self._handoff_cond:
                    if not self._handoff:
                        self._handoff_cond.wait(0.5)
                        continue
                    batch, self._handoff = self._handoff, []
                while batch and not self.stop_event.is_set():
                    room = min(self._wait_for_room(), BATCH_SIZE)
                    chunk, batch = batch[:room], batch[room:]
                    if self.pool is not None:
                        # Still claimed (and renewed) until a thread starts it: `_delivered`.
                        self.pool.submit(chunk)
                        self.stats.dispatched += len(chunk)
                    else:
                        self._enqueue([(plan_id, token) for plan_id, token, _ in chunk])
                if batch:
                    with self._handoff_cond:  # stopping: shutdown gives these back
                        self._handoff[:0] = batch
        finally:
            connections.close_all()

    def _enqueue(self, chunk: list[tuple[int, str]]) -> None:
        """PLAN_DELIVERY=queue: hand `chunk` to django-q2 workers as one task."""
        try:
            if len(chunk) == 1:
                enqueue(PLAN_EXECUTE, *chunk[0])
            else:
                enqueue(PLAN_EXECUTE_MANY, chunk)
        except Exception:
            logger.exception("could not hand plans %s to a worker", chunk)
            self._give_back([plan_id for plan_id, _ in chunk])
            return
        with self._cond:
            for plan_id, _ in chunk:
                self._dispatched.add(plan_id)
                self._known.pop(plan_id, None)
        self.stats.dispatched += len(chunk)

    def _delivered(self, plan_id: int, token: str) -> None:
        """A pool thread finished this arming of the plan: forget it (unless re-armed since)."""
        with self._cond:
            if self._known.get(plan_id) == token:
                del self._known[plan_id]

    def _redeliver_abandoned(self, now: dt.datetime) -> None:
        """On the watcher's own pool: deliver again the Running plans whose attempt is
        certainly over without a record (a killed watcher or worker was making it), rather
        than wait for the fallback pass in the shared task queue. One redelivery resumes each
        (`_resume_abandoned` compares and sets), however many watchers try."""
        if self.pool is None:
            return
        abandoned = plans_running_abandoned(now=now)
        if abandoned:
            logger.warning("delivering again %d plans abandoned mid-attempt", len(abandoned))
            self.pool.submit([(plan_id, token, None) for plan_id, token in abandoned])

    def _wait_for_room(self) -> int:
        """Block while TIMEDOUT_QUEUE_MAX_SIZE of our fired plans have not started yet; returns
        how many more may be handed over now (at least 1)."""
        limit = max(int(settings.TIMEDOUT_QUEUE_MAX_SIZE), 1)
        if self.pool is not None:
            while self.pool.waiting() >= limit and not self.stop_event.is_set():
                time.sleep(0.005)
            return max(limit - self.pool.waiting(), 1)
        while len(self._dispatched) >= limit and not self.stop_event.is_set():
            waiting = set(
                Plan.objects.filter(
                    pk__in=list(self._dispatched), state=PlanState.PRESET
                ).values_list("pk", flat=True)
            )
            with self._cond:
                self._dispatched &= waiting
            if len(self._dispatched) >= limit:
                time.sleep(0.05)
        return max(limit - len(self._dispatched), 1)

    def _give_back(self, plan_ids: list[int]) -> None:
        """Release claims we could not hand over, so the next tick (ours or another
        watcher's) arms them again."""
        with self._cond:
            for plan_id in plan_ids:
                self._known.pop(plan_id, None)
        try:
            plan_claims_release(owner=self.owner, plan_ids=plan_ids)
        except Exception:
            logger.exception("could not release plans %s; their lease will expire", plan_ids)

    # --- shutdown --------------------------------------------------------------------------
    def stop(self) -> None:
        self.stop_event.set()
        with self._cond:
            self._cond.notify_all()
        with self._handoff_cond:
            self._handoff_cond.notify_all()

    def shutdown(self) -> None:
        """Stop the threads and give back every claim not yet started: on the pool, the
        plans no thread took; with django-q2, those not handed to a worker. Attempts in
        progress on the pool get SHUTDOWN_GRACE seconds to end."""
        self.stop()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=5)
        if self.pool is not None:
            self.pool.take_waiting()
        with self._cond:
            # Running plans are no longer under our claim: releasing them changes nothing.
            undispatched = [pid for pid in self._known if pid not in self._dispatched]
            self._known.clear()
            self._heap.clear()
        try:
            released = plan_claims_release(owner=self.owner, plan_ids=undispatched)
            # A watcher stopped on purpose is no longer watched for (its heartbeat goes).
            heartbeat_forget(name=f"{WATCHER_HEARTBEAT_PREFIX}{self.owner}")
            logger.info("watcher %s stopped; released %d claims", self.owner, released)
        except Exception:
            logger.exception("watcher %s could not release its claims", self.owner)
        if self.pool is not None:
            self.pool.shutdown(grace=SHUTDOWN_GRACE)
        connections.close_all()
