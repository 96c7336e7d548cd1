"""The quick mode of `make bench` (`bench/run_all.py --quick`): every script runs with tiny
sizes, to prove it still runs and prints its table (CI runs it), not to measure anything."""

from __future__ import annotations

import os

QUICK_FLAG = "BENCH_QUICK"


def quick() -> bool:
    """Whether this run is the quick mode (sizes tiny, targets not judged)."""
    return os.environ.get(QUICK_FLAG) == "1"


def sized(normal: int, tiny: int) -> int:
    """`tiny` in the quick mode, else `normal`."""
    return tiny if quick() else normal
