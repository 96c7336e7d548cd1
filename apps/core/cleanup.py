"""Cleanup registry: each app registers the kinds of stale data it knows how to remove.

`manage.py cleanup` and the periodic django-q2 task both run `cleanup_run`, so a kind removes
exactly the same rows whichever way it is started.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.utils import timezone


@dataclass(frozen=True)
class CleanupReport:
    kind: str
    count: int
    items: list[str] = field(default_factory=list)


CleanupFunc = Callable[..., CleanupReport]


@dataclass(frozen=True)
class CleanupKind:
    name: str
    description: str
    func: CleanupFunc


_KINDS: dict[str, CleanupKind] = {}


def register_cleanup(name: str, description: str) -> Callable[[CleanupFunc], CleanupFunc]:
    """Register `func(*, now, dry_run) -> CleanupReport` under `name` (one per name)."""

    def decorator(func: CleanupFunc) -> CleanupFunc:
        _KINDS[name] = CleanupKind(name=name, description=description, func=func)
        return func

    return decorator


def unregister_cleanup(name: str) -> None:
    _KINDS.pop(name, None)


def cleanup_kinds() -> dict[str, CleanupKind]:
    return dict(sorted(_KINDS.items()))


def cleanup_run(
    *, only: Iterable[str] | None = None, dry_run: bool = False, now: dt.datetime | None = None
) -> list[CleanupReport]:
    """Run the registered kinds (all, or those in `only`) and report what each removed.

    With `dry_run` nothing is deleted and each report lists what would be. Each kind commits
    on its own, so a failing kind does not undo another's work. Raises KeyError for an
    unknown kind before running any.
    """
    kinds = cleanup_kinds()
    names = list(only) if only is not None else list(kinds)
    unknown = [name for name in names if name not in kinds]
    if unknown:
        raise KeyError(", ".join(unknown))
    moment = now or timezone.now()
    return [kinds[name].func(now=moment, dry_run=dry_run) for name in names]
