"""A cluster worker records every chain task's items on one thread and one database connection
(`rescore_overlap`): a connection opened per chain task cost the server a new backend every
`RESCORE_BATCH` items. Elsewhere (here, the `sync` mode) each chain closes its own. The kept
connection is checked at a chain's first record, not before every record."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, connections

from apps.benchmarks.services import rescore_overlap
from apps.benchmarks.services.rescore_overlap import Recorder, kept_close
from apps.core import cluster

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def as_cluster_worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process as a worker of a `GracefulSentinel` cluster (the flag its workers
    inherit), its kept record thread closed afterwards."""
    monkeypatch.setattr(cluster, "_in_cluster", True)
    try:
        yield
    finally:
        kept_close()


def _chain(records: int, seen: list[tuple[threading.Thread, Any]]) -> None:
    """One chain task's records: each notes its thread and its database connection."""

    def record() -> str:
        connection.ensure_connection()
        seen.append((threading.current_thread(), connection.connection))
        return "done"

    recorder = Recorder()
    try:
        for _ in range(records):
            recorder.submit(record)
        assert recorder.wait() == "done"
    finally:
        recorder.close()


@pytest.mark.usefixtures("as_cluster_worker")
def test_a_cluster_worker_records_its_chains_on_one_thread_and_connection() -> None:
    seen: list[tuple[threading.Thread, Any]] = []
    for _ in range(3):
        _chain(2, seen)
    threads = {thread for thread, _ in seen}
    assert len(seen) == 6
    assert len(threads) == 1
    assert threading.current_thread() not in threads
    first = seen[0][1]
    assert all(handle is first for _, handle in seen)
    assert next(iter(threads)).is_alive()  # kept for the next chain task


def test_outside_a_cluster_each_chain_closes_its_thread_and_connection() -> None:
    seen: list[tuple[threading.Thread, Any]] = []
    for _ in range(2):
        _chain(2, seen)
    threads = [thread for thread, _ in seen]
    assert threads[0] is threads[1]
    assert threads[2] is threads[3]
    assert threads[0] is not threads[2]
    assert not any(thread.is_alive() for thread in threads)
    assert rescore_overlap._kept is None


@pytest.mark.usefixtures("as_cluster_worker")
def test_the_kept_connection_is_checked_at_a_chain_s_first_record_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checks: list[threading.Thread] = []
    wrapper = type(connections["default"])
    check = wrapper.close_if_unusable_or_obsolete

    def counted(self: Any) -> None:
        checks.append(threading.current_thread())
        check(self)

    monkeypatch.setattr(wrapper, "close_if_unusable_or_obsolete", counted)
    seen: list[tuple[threading.Thread, Any]] = []
    for _ in range(2):
        _chain(3, seen)
    recorders = {thread for thread, _ in seen}
    assert len([thread for thread in checks if thread in recorders]) == 2
