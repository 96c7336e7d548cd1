"""httpx, imported on first use without its command line (`load()`).

A command that talks to a plain-HTTP server sends its requests itself (`yoyaku_client.direct`,
`yoyaku_client.wire`) and never needs httpx: importing it took about a third of the client's
start-up. Everything else (TLS, a proxy, a caller's own transport, resumable uploads,
downloads, raising a transport error) gets it from `load()`.

`import httpx` also imports `httpx._main`, httpx's own command line client, whenever click and
rich are installed, as they always are beside this package; that module imports pygments'
lexers and rich's syntax highlighting, for a function this package never calls. While httpx is
imported here, that one module is marked as absent (a `None` entry in `sys.modules` makes its
import fail), so httpx takes its own fallback (a `main` that says its command line extras are
missing). The mark is taken away at once: a program that imports `httpx._main` itself later
still gets it.
"""

from __future__ import annotations

import sys
from types import ModuleType

__all__ = ["load"]


def load() -> ModuleType:
    """The `httpx` module, imported now if it was not."""
    module = sys.modules.get("httpx")
    if module is not None:
        return module
    sys.modules["httpx._main"] = None  # type: ignore[assignment]
    try:
        import httpx
    finally:
        if "httpx._main" in sys.modules and sys.modules["httpx._main"] is None:
            del sys.modules["httpx._main"]
    return httpx
