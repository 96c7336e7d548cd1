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
    """bubblewrap options, given after the filesystem's (`staged`: before its root is made
    read-only), the descriptors to pass it, and the compiled runner's options."""

    args: list[str]
    fds: tuple[int, ...]
    staged: list[str]
    runner_args: list[str]


@contextlib.contextmanager
def sandbox_surface(limits: Limits, *, by_runner: bool = False) -> Iterator[Surface]:
    """The options of one sandbox's filter and masks; the descriptors are closed on exit.
    bubblewrap loads the filter and binds the masks, or with `by_runner` the compiled runner
    does both before anything else runs in the sandbox (see `runner.c`). Raises
    `SeccompUnavailable` when the filter cannot be built: no sandbox runs without it."""
    with seccomp_fd() as filter_fd, proc_mask(limits, by_runner=by_runner) as mask:
        fds = (filter_fd, *mask.fds)
        if by_runner:
            yield Surface([], fds, mask.args, [f"--seccomp={filter_fd}", *mask.runner_args])
        else:
            yield Surface(["--seccomp", str(filter_fd), *mask.args], fds, [], [])
