"""`bench/isolation.py --breakdown`: where an isolated run's time goes over a bare bubblewrap
run. The same trivial program runs under bubblewrap with the product's pieces added one at a
time (interleaved, so a busy spell hits every way alike); each step's median minus the one
before is that piece's cost."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from apps.grading.isolation.limits import Limits, sandbox_host_uid
from apps.grading.isolation.procmask import proc_mask
from apps.grading.isolation.run import SETPRIV
from apps.grading.isolation.seccomp import seccomp_fd, seccomp_program

Way = Callable[[], None]


def breakdown(
    *, bwrap: str, base: Sequence[str], python: str, folder: Path, limits: Limits, rounds: int
) -> list[tuple[str, float]]:
    """Median seconds per way, in the order the pieces are added. `base` is the bare
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

    def run(
        *, filter_: bool, masks: bool, command: list[str], launcher: list[str], nested: bool = True
    ) -> Way:
        def way() -> None:
            with seccomp_fd() as fd, proc_mask(limits) as mask:
                # The product's user namespaces: its own, and no more inside (a nested one).
                options = [*base, *(["--unshare-user", "--disable-userns"] if nested else [])]
                fds: list[int] = []
                if filter_:
                    options += ["--seccomp", str(fd)]
                    fds.append(fd)
                if masks:
                    options += mask.args
                    fds += mask.fds
                subprocess.run(
                    [*launcher, bwrap, *options, *command], check=True, env={}, pass_fds=fds
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
    samples: dict[str, list[float]] = {name: [] for name, _ in ways}
    for _ in range(rounds):
        for name, way in ways:
            for _ in range(5):
                started = time.perf_counter()
                way()
                samples[name].append(time.perf_counter() - started)
    return [(name, statistics.median(values)) for name, values in samples.items()]
