"""Run one program under the limits, inside bubblewrap or (asked for by name) without it.

`run_program` takes paths, limits and argv and returns an `Outcome`; it never raises for
anything the program does. Nothing here imports Django. The steps live beside it: what the
sandbox holds (`mounts`, `bubblewrap`, `surface`), the bounds (`limits`), the processes
(`process`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import posixpath
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from apps.grading.isolation.bubblewrap import bwrap_argv, runner_argv, sandbox_env
from apps.grading.isolation.export import exported_report
from apps.grading.isolation.limits import (
    MAX_METRICS_BYTES,
    OUTPUT_KILL_FACTOR,
    PYTHON_FLAGS,
    Limits,
    child_setup,
    rlimits,
    sandbox_host_uid,
    tasks_of_uid,
)
from apps.grading.isolation.metrics_file import read_metrics_file
from apps.grading.isolation.mounts import InputFiles, input_files, stage_folders_problem
from apps.grading.isolation.process import Pumped, bubblewrap_started, pump, unisolated_started
from apps.grading.isolation.runner import COPY_FAILED, launcher, runner_binary
from apps.grading.isolation.surface import SeccompUnavailable, sandbox_surface

BUBBLEWRAP = "bubblewrap"
NONE = "none"
METRICS_FILE = "metrics.json"
# Room for the tar headers of an output folder on top of its bytes.
SPOOL_MARGIN = 16 * 1024 * 1024
SCRATCH_TOO_SMALL = "The submission's files do not fit in the sandbox's scratch space."
# `Outcome.limit`: the bound that ended a run early.
WALL = "wall_seconds"
OUTPUT = "output_bytes"
SCRATCH = "scratch_bytes"

__all__ = ["BUBBLEWRAP", "NONE", "Outcome", "run_program", "sandbox_host_uid"]


@dataclass
class Outcome:
    """What happened. `exit_code` is negative for a fatal signal; `metrics` holds the bytes of
    a regular `metrics.json`, or None with `metrics_problem` saying why there are none."""

    exit_code: int | None
    timed_out: bool
    logs: str
    wall_seconds: float
    metrics: bytes | None = None
    metrics_problem: str = ""
    # Set when the program was stopped for printing too much, or its sandbox could not start or
    # report: the attempt fails with this reason.
    error: str = ""
    # The bound that ended the run early (`WALL`, `OUTPUT`, `SCRATCH`), if one did.
    limit: str = ""


def run_program(
    *,
    isolation: str,
    input_dir: Path,
    program: Sequence[str],
    limits: Limits,
    python: str,
    readonly_paths: Sequence[str] = (),
    bwrap: str | None = None,
    on_output: Callable[[str], None] | None = None,
    mounts: Mapping[str, Path] | None = None,
    output: str = "",
    result: str = METRICS_FILE,
    environment: Mapping[str, str] | None = None,
    collect: Path | None = None,
    readonly_work: bool = False,
) -> Outcome:
    """Run `python -E -s *program` with a copy of `input_dir` as its working folder.

    `result` names the file reported back as `Outcome.metrics` (relative to the working
    folder, or in `output`). A stage may add read-only `mounts` (inside path → host folder),
    one writable `output` folder and `environment` variables (see `bubblewrap.bwrap_argv`);
    only bubblewrap can give those, and a stage whose folders cannot be given gets an
    `Outcome` with the `error` saying why. With `collect` (a host folder of the worker's), the
    output folder's folders and regular files are written there after the program ended
    (`export.output_unpack`). With `readonly_work` (bubblewrap only) the working folder is
    `input_dir` itself, read-only, instead of a writable copy.

    `isolation="bubblewrap"`: inside a new sandbox (see `bubblewrap`); `input_dir` is only read.
    `isolation="none"`: directly in `input_dir`, with the same rlimits, environment and uid but
    no namespaces — the program can read whatever that uid can. Only for a development machine
    without bubblewrap, and only when the operator asked for it.

    A root worker runs either as `sandbox_host_uid()` (real = effective = saved, no
    supplementary groups); `input_dir` must be traversable by that uid.

    `on_output(logs so far)` is called while the program runs, at most every
    `process.OUTPUT_PROGRESS_SECONDS`, when it printed something new (live logs).
    """
    started = time.monotonic()
    folders = _Folders(
        dict(mounts or {}), output, result, dict(environment or {}), collect, readonly_work
    )
    problem = folders.problem(isolation, readonly_paths)
    if problem:
        return Outcome(exit_code=None, timed_out=False, logs="", wall_seconds=0.0, error=problem)
    if isolation == BUBBLEWRAP:
        if bwrap is None:
            raise ValueError("isolation='bubblewrap' needs the bwrap binary's path")
        runner = runner_binary()
        return _run_bubblewrap(
            bwrap=bwrap,
            runner=runner,
            input_dir=input_dir,
            command=functools.partial(
                folders.runner,
                python=python,
                program=program,
                limits=limits,
                compiled=runner is not None,
            ),
            limits=limits,
            readonly_paths=readonly_paths,
            folders=folders,
            started=started,
            on_output=on_output,
        )
    if isolation == NONE:
        return _run_unisolated(
            argv=[python, *PYTHON_FLAGS, *program],
            cwd=input_dir,
            limits=limits,
            folders=folders,
            started=started,
            on_output=on_output,
        )
    raise ValueError(f"unknown isolation {isolation!r}")


@dataclass(frozen=True)
class _Folders:
    """A stage's own folders, result file and environment (see `run_program`)."""

    mounts: dict[str, Path]
    output: str
    result: str
    environment: dict[str, str]
    collect: Path | None = None
    readonly_work: bool = False

    def problem(self, isolation: str, readonly_paths: Sequence[str]) -> str | None:
        if isolation == NONE and self.readonly_work:
            return "This stage needs bubblewrap: its working folder is read-only."
        if self.collect is not None and not (self.output and self.collect.is_dir()):
            return "Collecting an output folder needs one, and a host folder to receive it."
        if isolation == NONE and (self.mounts or self.output):
            return (
                "This stage needs bubblewrap: it reads or writes folders at fixed paths "
                f"({', '.join([*self.mounts, *([self.output] if self.output else [])])})."
            )
        if not self.result or "\0" in self.result or self.result.endswith("/"):
            return f"{self.result!r} cannot be a result file."
        if self.result.startswith("/") and not (
            self.output and self.result.startswith(self.output + "/")
        ):
            return f"The result file {self.result!r} is outside the working and output folders."
        return stage_folders_problem(
            mounts=self.mounts,
            output=self.output,
            environment=self.environment,
            readonly_paths=readonly_paths,
        )

    def runner(
        self,
        *,
        python: str,
        program: Sequence[str],
        limits: Limits,
        compiled: bool,
        setup: Sequence[str],
    ) -> list[str]:
        export = self.output if self.collect is not None else ""
        return runner_argv(
            python=python,
            program=program,
            limits=limits,
            result=self.result,
            export=export,
            compiled=compiled,
            setup=setup,
        )

    def bwrap_options(
        self,
        *,
        input_dir: Path,
        limits: Limits,
        readonly_paths: Sequence[str],
        inputs: InputFiles,
        runner: str | None,
        staged: Sequence[str],
    ) -> list[str]:
        return bwrap_argv(
            input_dir=input_dir,
            limits=limits,
            readonly_paths=readonly_paths,
            files=inputs.files,
            folders=inputs.folders,
            mounts={inside: str(host) for inside, host in self.mounts.items()},
            output=self.output,
            environment=self.environment,
            readonly_work=self.readonly_work,
            runner=runner,
            staged=staged,
        )


# --- bubblewrap -------------------------------------------------------------------------------


def _run_bubblewrap(
    *,
    bwrap: str,
    runner: str | None,
    input_dir: Path,
    command: Callable[..., list[str]],
    limits: Limits,
    readonly_paths: Sequence[str],
    folders: _Folders,
    started: float,
    on_output: Callable[[str], None] | None,
) -> Outcome:
    with input_files(input_dir) as inputs, contextlib.ExitStack() as stack:
        try:  # the seccomp filter and the /proc masks: no sandbox runs without them
            surface = stack.enter_context(sandbox_surface(limits, by_runner=runner is not None))
        except SeccompUnavailable as error:
            return Outcome(
                exit_code=None, timed_out=False, logs="", wall_seconds=0.0, error=str(error)
            )
        if inputs.size > limits.scratch_bytes and not folders.readonly_work:
            return Outcome(
                exit_code=COPY_FAILED,
                timed_out=False,
                logs="",
                wall_seconds=0.0,
                error=SCRATCH_TOO_SMALL,
                limit=SCRATCH,
            )
        options = folders.bwrap_options(
            input_dir=input_dir,
            limits=limits,
            readonly_paths=readonly_paths,
            inputs=inputs,
            runner=runner,
            staged=surface.staged,
        )
        # A stage that hands its output folder back sends it on the result channel, kept in a
        # host file bounded by the scratch space it came from.
        spool = stack.enter_context(tempfile.TemporaryFile()) if folders.collect else None
        with bubblewrap_started(
            launcher=launcher(bwrap, runner),
            options=[*options, *surface.args],
            command=command(setup=surface.runner_args),
            extra_fds=(*(() if folders.readonly_work else inputs.fds), *surface.fds),
        ) as process:
            seen = pump(
                process,
                limits=limits,
                started=started,
                result_channel=True,
                on_output=on_output,
                spool=spool,
                spool_cap=limits.scratch_bytes + MAX_METRICS_BYTES + SPOOL_MARGIN,
            )
        return _bubblewrap_outcome(
            seen, folders, limits=limits, started=started, status=process.returncode
        )


def _bubblewrap_outcome(
    seen: Pumped, folders: _Folders, *, limits: Limits, started: float, status: int
) -> Outcome:
    outcome = _outcome_of(seen, limits=limits, started=started)
    if seen.timed_out or seen.output_exceeded:
        return outcome
    raw, problem = bytes(seen.result), ""
    if seen.spool is not None and folders.collect is not None:
        raw, problem = exported_report(
            seen.spool,
            folders.collect,
            max_bytes=limits.scratch_bytes,
            overflow=seen.spool_overflow,
        )
    name = posixpath.basename(folders.result)
    _parse_result(raw, outcome, bwrap_status=status, name=name)
    if problem and not outcome.error:
        outcome.error = problem
    return outcome


def _outcome_of(seen: Pumped, *, limits: Limits, started: float) -> Outcome:
    """The outcome as far as the pump saw it: the logs, a timeout, too much output."""
    outcome = Outcome(
        exit_code=None,
        timed_out=seen.timed_out,
        logs=seen.logs.text(),
        wall_seconds=time.monotonic() - started,
        limit=WALL if seen.timed_out else "",
    )
    if seen.output_exceeded:
        outcome.limit = OUTPUT
        outcome.error = (
            f"The program printed more than {limits.output_bytes * OUTPUT_KILL_FACTOR} bytes "
            "and was stopped."
        )
    return outcome


def _parse_result(raw: bytes, outcome: Outcome, *, bwrap_status: int, name: str) -> None:
    """Read the runner's report (see `bubblewrap.RUNNER`) into `outcome`."""
    head, _, rest = raw.partition(b"\n")
    try:
        status = int(head.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        # The runner never reported: the sandbox could not start, or the program killed it.
        outcome.exit_code = bwrap_status
        outcome.error = (
            "The sandbox ended without reporting a result "
            f"(bubblewrap exit status {bwrap_status}); see the logs."
        )
        return
    if not 0 <= status <= 255:
        # sh reports 0-255; anything else was written by a program that took over its runner
        # (a 20-digit status overflowed the attempt's exit_code column in the worker).
        outcome.exit_code = bwrap_status
        outcome.error = f"The sandbox reported an exit status out of range ({head[:32]!r})."
        return
    if status == COPY_FAILED:
        outcome.exit_code = status
        outcome.error = SCRATCH_TOO_SMALL
        outcome.limit = SCRATCH
        return
    # sh reports a fatal signal n as 128 + n.
    outcome.exit_code = -(status - 128) if 128 < status < 128 + 65 else status
    kind, payload = rest[:1], rest[1:]
    if kind == b"F":
        if len(payload) > MAX_METRICS_BYTES:
            outcome.metrics_problem = f"{name} is larger than {MAX_METRICS_BYTES} bytes."
        else:
            outcome.metrics = payload
    elif kind in (b"L", b"S"):
        outcome.metrics_problem = f"{name} is not a regular file."


# --- unisolated -------------------------------------------------------------------------------


def _run_unisolated(
    *,
    argv: list[str],
    cwd: Path,
    limits: Limits,
    folders: _Folders,
    started: float,
    on_output: Callable[[str], None] | None,
) -> Outcome:
    host_uid = sandbox_host_uid()
    # A non-root worker shares its uid with the program: the budget comes on top of what
    # that uid already runs.
    processes = limits.processes
    identity: dict[str, object] = {}
    if host_uid is None:
        processes += tasks_of_uid(os.getuid())
    else:
        identity = {"user": host_uid, "group": host_uid, "extra_groups": []}
    with unisolated_started(
        argv=argv,
        cwd=cwd,
        env=sandbox_env(home=str(cwd), tmp=str(cwd), extra=folders.environment),
        setup=child_setup(rlimits(limits, processes=processes)),
        identity=identity,
    ) as process:
        seen = pump(
            process, limits=limits, started=started, result_channel=False, on_output=on_output
        )
    outcome = _outcome_of(seen, limits=limits, started=started)
    outcome.exit_code = process.returncode
    if not (seen.timed_out or seen.output_exceeded):
        outcome.metrics, outcome.metrics_problem = read_metrics_file(cwd / folders.result)
    return outcome
