"""The django-q2 cluster's stop: SIGTERM ends `manage.py qcluster` within seconds, also while a
grading runs.

`manage.py qcluster` is a main process, a sentinel, and the sentinel's workers, monitor and
pusher. django-q2 leaves SIGTERM's default action (die at once) on the sentinel and everything
it forks. A process manager that signals the whole process group (honcho, `kill -TERM -PGID`,
systemd's default `KillMode=control-group`) therefore kills the sentinel while it sleeps on the
cluster's stop event; the main process's handler then sets that event, and `multiprocessing`'s
`Condition.notify_all` waits forever for the dead sleeper to acknowledge. The main process hangs
until the manager's SIGKILL. And a stop that does reach the sentinel waits for every worker to
finish its task: a grading may run for GRADING_TIMEOUT.

Here instead:

* The sentinel, and the processes it forks, ignore SIGTERM: the main process alone acts on it,
  through django-q2's own orderly stop (stop event, pusher stops, poison pills, workers finish
  their task, monitor drains the results). `manage.py qcluster` is this app's command, which
  starts the cluster with `GracefulSentinel`.
* Each worker handles SIGTERM itself (`worker_signals_install`, at spawn), and the sentinel
  sends it to every worker as it begins to stop, so a stop reaches the workers whoever was
  signalled. The handler marks the worker as stopping; inside an `interruptible()` block it
  raises `WorkerStopping` there, so a long task (a grading) ends at once, its `finally` blocks
  killing what it started. A task gives its work back (see `grading_run`), then calls
  `worker_leave`: outside a cluster stop the worker leaves through django-q2's own timeout
  exit and is replaced. Tasks that are not interruptible run to their end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from django_q.cluster import Sentinel


class WorkerStopping(BaseException):
    """Raised inside `interruptible()` in a worker asked to stop. A BaseException, so that the
    task's `except Exception` does not take it for a failure of the work."""


_stopping = False
_interruptible = False
# Set in a GracefulSentinel's process, so true in the workers it forks; false where django-q2
# runs a task in-process (`sync`, the test suite) and the signals are not the cluster's.
_in_cluster = False
# The cluster's stop event (a multiprocessing.Event), inherited by the workers the same way.
_cluster_stop_event: Any = None


def in_cluster() -> bool:
    """Whether this process is a worker (or another process) of a `GracefulSentinel`'s
    cluster, rather than one where django-q2 runs tasks in-process (`sync`, the tests)."""
    return _in_cluster


def worker_stopping() -> bool:
    """Whether this worker process was asked to stop (it then takes no new long work)."""
    return _stopping


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """A block that a stop of this worker interrupts with `WorkerStopping` (raised at once when
    the stop came before). Main thread only; outside a worker (tests, web) it changes nothing."""
    global _interruptible
    if _stopping:
        raise WorkerStopping()
    _interruptible = True
    try:
        yield
    finally:
        _interruptible = False


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    global _stopping, _interruptible
    _stopping = True
    if _interruptible:
        _interruptible = False  # once: a second signal must not interrupt the clean-up
        raise WorkerStopping()


def worker_leave() -> None:
    """Called by a task that gave its work back because this worker is stopping.

    In a cluster stop it returns: the task ends normally and the worker exits on its poison
    pill. A worker signalled alone (django-q2's guard after a timeout, an operator) raises
    django-q2's TimeoutException instead, the one way out of a worker's loop that keeps the task
    queue sound: the task is recorded failed, the worker exits, and the guard starts a new one.
    Killing a worker outright could leave the queue's lock held by a dead process.
    """
    from django_q.exceptions import TimeoutException

    event = _cluster_stop_event
    if event is not None and event.is_set():
        return
    raise TimeoutException("The worker was asked to stop (SIGTERM); its work was given back.")


def worker_signals_install(**kwargs: Any) -> None:
    """django-q2 `post_spawn` receiver: a worker of this cluster handles SIGTERM (see above).

    django-q2's sync mode (`Q_CLUSTER["sync"]`) runs the worker in the caller's process, on
    whatever thread enqueued (a watcher's dispatch thread): a handler can only be installed
    from the main thread, and there is no worker process to stop, so nothing is installed."""
    if not _in_cluster or threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGTERM, _on_sigterm)


class GracefulSentinel(Sentinel):
    """django-q2's sentinel, ignoring SIGTERM and passing it on to its workers when it stops."""

    def __init__(
        self,
        stop_event: Any,
        start_event: Any,
        cluster_id: Any,
        broker: Any = None,
        timeout: Any = None,
        start: bool = True,
    ) -> None:
        global _in_cluster, _cluster_stop_event
        super().__init__(stop_event, start_event, cluster_id, broker, timeout, start=False)
        # All three inherited by the workers, monitor and pusher forked from here.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _in_cluster = True
        _cluster_stop_event = stop_event
        if start:
            self.start()

    def stop(self) -> None:
        for process in list(self.pool):
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(process.pid, signal.SIGTERM)
        super().stop()
