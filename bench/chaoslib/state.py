"""What the load and the faults record while the run goes on."""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field

from bench.chaoslib.transport import Answer


@dataclass
class Fault:
    kind: str
    at: float
    target: str = ""
    recovered_at: float | None = None
    detail: str = ""
    plans: list[int] = field(default_factory=list)  # a watcher's armed plans


@dataclass
class State:
    stop_load: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    answers: list[Answer] = field(default_factory=list)
    created_jobs: set[str] = field(default_factory=set)
    accepted_jobs: set[str] = field(default_factory=set)
    key_jobs: dict[tuple[str, str], set[str]] = field(
        default_factory=lambda: collections.defaultdict(set)
    )
    lives: dict[str, str] = field(default_factory=dict)  # life_uuid -> receiver scenario
    samples: int = 0
    over_limit: list[str] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    pg_window: tuple[float, float] | None = None
    load_errors: collections.Counter[str] = field(default_factory=collections.Counter)
    reviews_done: int = 0
    orphans_swept: str = ""
