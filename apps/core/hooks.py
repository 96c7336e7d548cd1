"""Named hooks: how a lower app lets the apps above it act inside its transactions without
importing them. The lower app owns a `NamedHooks`; an app above registers a function under a
name from its `registry.py`; the lower app calls `run(**kwargs)` where the event happens."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Hook = Callable[..., None]


class NamedHooks:
    """Hooks called in registration order with the event's keyword arguments. Registering a
    name again replaces its hook."""

    def __init__(self) -> None:
        self._hooks: dict[str, Hook] = {}

    def register(self, name: str) -> Callable[[Hook], Hook]:
        def register(hook: Hook) -> Hook:
            self._hooks[name] = hook
            return hook

        return register

    def run(self, **kwargs: Any) -> None:
        for hook in self._hooks.values():
            hook(**kwargs)
