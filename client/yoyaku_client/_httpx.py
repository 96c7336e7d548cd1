"""httpx without its command line client, imported first (from the package's `__init__`).

`import httpx` also imports `httpx._main`, httpx's own command line client, whenever click and
rich are installed, as they always are beside this package; that module imports pygments'
lexers and rich's syntax highlighting, a large share of the start-up of every `yoyaku`
command, for a function this package never calls. While httpx is imported here, that one
module is marked as absent (a `None` entry in `sys.modules` makes its import fail), so httpx
takes its own fallback (a `main` that says its command line extras are missing). The mark is
taken away at once: a program that imports `httpx._main` itself later still gets it.
"""

from __future__ import annotations

import sys

if "httpx" not in sys.modules:
    sys.modules["httpx._main"] = None  # type: ignore[assignment]
    try:
        import httpx  # noqa: F401
    finally:
        if "httpx._main" in sys.modules and sys.modules["httpx._main"] is None:
            del sys.modules["httpx._main"]
