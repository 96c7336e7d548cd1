"""Race helpers: run callables at the same instant in real threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connections


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def run_concurrently(
    func: Callable[[int], Any], n: int, *, timeout: float = 120.0
) -> list[Outcome]:
    """Call `func(i)` for i in range(n), each in its own thread, released together by a Barrier.

    Each thread closes its database connections when done (Django opens one per thread).
    Returns one Outcome per call, in index order; exceptions are captured, not raised.
    """
    barrier = threading.Barrier(n)
    outcomes = [Outcome() for _ in range(n)]

    def worker(index: int) -> None:
        try:
            barrier.wait(timeout=timeout)
            outcomes[index].value = func(index)
        except BaseException as exc:
            outcomes[index].error = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
        if thread.is_alive():
            raise TimeoutError("a racing thread did not finish")
    return outcomes
