"""Can this host isolate? Answered by running a real program in a real sandbox once."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from apps.grading.isolation.bubblewrap import bwrap_path
from apps.grading.isolation.limits import Limits
from apps.grading.isolation.run import BUBBLEWRAP, NONE, run_program
from apps.grading.isolation.runner import runner_binary
from apps.grading.isolation.scratch import input_folder, input_folder_hand_over
from apps.grading.isolation.seccomp import seccomp_problem

_PROBE_PROGRAM = "open('metrics.json', 'w').write('{\"score\": 1}')\n"
_PROBE_LIMITS = Limits(
    wall_seconds=20,
    cpu_seconds=20,
    memory_bytes=512 * 1024 * 1024,
    file_bytes=1024 * 1024,
    scratch_bytes=4 * 1024 * 1024,
    processes=32,
)


# Folders the sandbox creates for itself; an operator's read-only folder cannot live there.
_SANDBOX_OWN = (
    "/tmp/",  # noqa: S108 - a path inside the sandbox
    "/sandbox/",
    "/input/",
    "/proc/",
    "/dev/",
)


@dataclass(frozen=True)
class Probe:
    """`isolation` is `bubblewrap` when a program ran in a sandbox here, else `none` with the
    reason; `runner` says which runner the sandbox starts (`compiled` or `shell`, see
    `runner.py`)."""

    isolation: str
    reason: str = ""
    bwrap: str | None = None
    runner: str = ""


def interpreter_problem(python: str, readonly_paths: Sequence[str]) -> str | None:
    """Why `python` cannot be the sandbox's interpreter, or None."""
    if not os.path.isabs(python):
        return f"GRADING_PYTHON must be an absolute path (got {python!r})."
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        return f"GRADING_PYTHON {python!r} is not an executable file."
    visible = ("/usr/", *(p.rstrip("/") + "/" for p in readonly_paths))
    if not python.startswith(visible):
        return (
            f"GRADING_PYTHON {python!r} is outside the sandbox: it must be under /usr or one of "
            "GRADING_READONLY_PATHS."
        )
    for path in readonly_paths:
        if not (os.path.isabs(path) and os.path.isdir(path)):
            return f"GRADING_READONLY_PATHS entry {path!r} is not an absolute folder path."
        if path.rstrip("/") in ("", "/usr") or (path.rstrip("/") + "/").startswith(_SANDBOX_OWN):
            return (
                f"GRADING_READONLY_PATHS entry {path!r} is the root, /usr, or under a folder the "
                "sandbox makes itself (/tmp, /sandbox, /input, /proc, /dev)."
            )
    return None


@functools.lru_cache(maxsize=8)
def isolation_probe(python: str, readonly_paths: tuple[str, ...] = ()) -> Probe:
    """Run a trivial program through the full bubblewrap path once per process and arguments
    (about 30 ms), as the uid gradings will use."""
    problem = interpreter_problem(python, readonly_paths)
    if problem:
        return Probe(NONE, problem)
    bwrap = bwrap_path()
    if bwrap is None:
        return Probe(NONE, "bubblewrap (bwrap) is not installed.")
    # The filter is part of the sandbox: without it this host cannot sandbox.
    problem = seccomp_problem()
    if problem:
        return Probe(NONE, problem, bwrap=bwrap)
    with input_folder() as folder:
        Path(folder, "probe.py").write_text(_PROBE_PROGRAM)
        input_folder_hand_over(folder, isolation=BUBBLEWRAP)
        outcome = run_program(
            isolation=BUBBLEWRAP,
            input_dir=folder,
            program=["probe.py"],
            limits=_PROBE_LIMITS,
            python=python,
            readonly_paths=readonly_paths,
            bwrap=bwrap,
        )
    if outcome.exit_code == 0 and outcome.metrics == b'{"score": 1}':
        return Probe(BUBBLEWRAP, bwrap=bwrap, runner="compiled" if runner_binary() else "shell")
    detail = (outcome.error or outcome.logs).strip().splitlines()
    return Probe(
        NONE,
        "bubblewrap cannot start a sandbox here (user namespaces refused?): "
        + (detail[-1] if detail else f"exit status {outcome.exit_code}"),
        bwrap=bwrap,
    )
