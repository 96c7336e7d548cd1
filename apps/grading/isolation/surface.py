"""What a sandboxed program can reach of the kernel beyond its namespaces: the seccomp filter
(`seccomp`) and the host-wide `/proc` files masked inside (`procmask`), as bubblewrap options
and the descriptors they name."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from apps.grading.isolation.limits import Limits
from apps.grading.isolation.procmask import proc_mask
from apps.grading.isolation.seccomp import SeccompUnavailable, seccomp_fd

__all__ = ["SeccompUnavailable", "Surface", "sandbox_surface"]


@dataclass(frozen=True)
class Surface:
    """bubblewrap options, given after the filesystem's, and the descriptors to pass it."""

    args: list[str]
    fds: tuple[int, ...]


@contextlib.contextmanager
def sandbox_surface(limits: Limits) -> Iterator[Surface]:
    """The options of one sandbox's filter and masks; the descriptors are closed on exit.
    Raises `SeccompUnavailable` when the filter cannot be built: no sandbox runs without it."""
    with seccomp_fd() as filter_fd, proc_mask(limits) as mask:
        yield Surface(["--seccomp", str(filter_fd), *mask.args], (filter_fd, *mask.fds))
