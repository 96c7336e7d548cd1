"""`bench/isolation.py --breakdown`: where an isolated run's time goes over a bare bubblewrap
run. The same trivial program runs under bubblewrap with the product's pieces added one at a
time (interleaved, so a busy spell hits every way alike); each step's median minus the one
before is that piece's cost. Where the compiled runner can be built (`runner.py`), two more ways
replace the shell runner and `prlimit` by it, then `setpriv` by its `launch`."""

from __future__ import annotations

import ctypes
import os
import resource
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from apps.grading.isolation.limits import Limits, sandbox_host_uid
from apps.grading.isolation.procmask import proc_mask
from apps.grading.isolation.runner import INSIDE_PATH, SETPRIV, launcher_argv, runner_binary
from apps.grading.isolation.seccomp import seccomp_fd, seccomp_program

Way = Callable[[], None]


_PR_SET_CHILD_SUBREAPER = 36


def cpu_accounting() -> None:
    """Make this process the reaper of its orphans. bubblewrap exits on its sandbox's report
    without waiting for the sandbox's PID 1, whose processes' CPU time would then be counted
    by whoever reaps it: here, `cpu_seconds` after `reap_orphans`."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_CHILD_SUBREAPER")


def reap_orphans() -> None:
    """Wait for every child left (a sandbox's PID 1 handed to this process)."""
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


def cpu_seconds() -> float:
    """User + system time of this process and every child it reaped."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(run: Callable[[], None]) -> tuple[float, float]:
    """Wall and CPU seconds of one run; the CPU counts its orphans, reaped after the wall
    clock stopped."""
    started, cpu = time.perf_counter(), cpu_seconds()
    run()
    wall = time.perf_counter() - started
    reap_orphans()
    return wall, cpu_seconds() - cpu


def breakdown(
    *, bwrap: str, base: Sequence[str], python: str, folder: Path, limits: Limits, rounds: int
) -> list[tuple[str, float, float]]:
    """Median wall and CPU seconds (of the started processes) per way, in the order the pieces
    are added. `base` is the bare
    bubblewrap's options (filesystem and namespaces), the program runs as `python -I
    main.py config.yaml` in `folder` (bound at /work)."""
    program = [python, "-I", "main.py", "config.yaml"]
    runner = ["/bin/sh", "-c", '"$@"', "runner"]
    prlimit = [
        *("/usr/bin/prlimit", f"--cpu={limits.cpu_seconds}", f"--as={limits.memory_bytes}"),
        *(f"--fsize={limits.file_bytes}", f"--nproc={limits.processes}", "--core=0", "--"),
    ]
    host_uid = sandbox_host_uid()
    setpriv = (
        [SETPRIV, f"--reuid={host_uid}", f"--regid={host_uid}", "--clear-groups", "--"]
        if host_uid is not None
        else []
    )
    seccomp_program()  # built once per process, as in a worker

    compiled = runner_binary()
    limits_args = list(prlimit[1:-1])

    def run(
        *,
        filter_: bool,
        masks: bool,
        command: list[str],
        launcher: list[str],
        nested: bool = True,
        compiled_masks: bool | None = None,
    ) -> Way:
        """`compiled_masks` None: the command as given; else the compiled runner, which loads
        the filter, and binds the masks itself when True (bubblewrap does when False)."""
        by_runner = bool(compiled_masks)

        def way() -> None:
            with seccomp_fd() as fd, proc_mask(limits, by_runner=by_runner) as mask:
                # The product's user namespaces: its own, and no more inside (a nested one).
                options = [*base, *(["--unshare-user", "--disable-userns"] if nested else [])]
                argv = command
                fds: list[int] = [fd] if filter_ else []
                if compiled_masks is not None and compiled is not None:  # as the product
                    options += ["--as-pid-1", "--ro-bind", compiled, INSIDE_PATH]
                    if by_runner:
                        options += ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]
                    setup = [f"--seccomp={fd}", *mask.runner_args]
                    argv = [INSIDE_PATH, "run", "metrics.json", "", *setup, *command]
                elif filter_:
                    options += ["--seccomp", str(fd)]
                if masks:
                    options += mask.args
                    fds += mask.fds
                subprocess.run(
                    [*launcher, bwrap, *options, *argv],
                    check=True,
                    env={},
                    pass_fds=fds,
                    stdout=subprocess.DEVNULL,
                )

        return way

    ways: list[tuple[str, Way]] = [
        ("bare bwrap", run(filter_=False, masks=False, command=program, launcher=[], nested=False)),
        ("+ --disable-userns", run(filter_=False, masks=False, command=program, launcher=[])),
        ("+ seccomp filter", run(filter_=True, masks=False, command=program, launcher=[])),
        ("+ /proc masks", run(filter_=True, masks=True, command=program, launcher=[])),
        (
            "+ /bin/sh runner",
            run(filter_=True, masks=True, command=[*runner, *program], launcher=[]),
        ),
        (
            "+ prlimit",
            run(filter_=True, masks=True, command=[*runner, *prlimit, *program], launcher=[]),
        ),
    ]
    if setpriv:
        command = [*runner, *prlimit, *program]
        ways.append(
            ("+ setpriv (root)", run(filter_=True, masks=True, command=command, launcher=setpriv))
        )
    if compiled is not None:
        # Unlike the shell runner's ways above, these also report metrics.json (a copy).
        inside = [*limits_args, "--", *program]
        for name, launch, by_runner in (
            ("compiled runner instead", setpriv, False),
            ("+ its own /proc masks", setpriv, True),
            (
                "+ its launch (root)",
                launcher_argv(compiled, host_uid, bwrap)[:-1] if host_uid is not None else [],
                True,
            ),
        ):
            way = run(
                filter_=True, masks=True, command=inside, launcher=launch, compiled_masks=by_runner
            )
            ways.append((name, way))
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in ways}
    for _ in range(rounds):
        for name, way in ways:
            for _ in range(5):
                samples[name].append(timed(way))
    return [
        (
            name,
            statistics.median(wall for wall, _ in values),
            statistics.median(cpu for _, cpu in values),
        )
        for name, values in samples.items()
    ]
