"""Grading as a pipeline of stages: each stage one program in a sandbox of its own.

A stage (`StageSpec`) is a program with its own files as working folder, host folders mounted
read-only at paths it names, one writable output folder, limits and environment variables; it
ends in a `StageOutcome` (exit, signal, timeout, the limits it hit, its logs, its result file).
A `StageBackend` runs one stage: `BubblewrapBackend` (every grading host) and
`UnisolatedBackend` (a development machine without bubblewrap, asked for by name) run it
through `apps.grading.isolation`; a container or remote backend is another class with the same
`run`. `pipeline_run` runs stages in order, stops at the first that fails, and hands every
stage's live logs to one callback.

A question's grading is a one-stage pipeline (`run`: the submission's program, `metrics.json`
in its working folder); a phase submission (SPEC §11.2, `apps.grading.phase_grader`) has a
`run` stage with its own files read-only, then a `score` stage (the host's program, the run
stage's predictions and the reference data read-only, `/scores/scores.json` written). What an
outcome means for a submission is decided in `apps.grading.results` and, for a phase,
`apps.grading.phase_results`; the lease and the result write never see a stage.

No Django here: stages are paths, limits and argv, like the isolation package.
"""

from __future__ import annotations

import functools
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

from apps.grading.isolation import BUBBLEWRAP, NONE, Limits, Outcome, run_program
from apps.grading.isolation.run import METRICS_FILE, OUTPUT, SCRATCH, WALL

# `(stage name, its logs so far)`, called while a stage runs.
StageLogs = Callable[[str, str], None]
# The limits a fatal signal tells were hit (the kernel's answer to RLIMIT_CPU, RLIMIT_FSIZE).
_SIGNAL_LIMITS = {signal.SIGXCPU: "cpu_seconds", signal.SIGXFSZ: "file_bytes"}


@dataclass(frozen=True)
class StageSpec:
    """One stage: `python -E -s *program` with a copy of `files` as its working folder.

    - `mounts`: inside path (`/data`, `/reference`, ...) → host folder, read-only; the folders
      must be readable by the sandbox's uid (`input_folder_hand_over` does it for a folder of
      the worker's).
    - `output`: the one writable folder besides the working folder and `/tmp` (`/output`,
      `/scores`), on the sandbox's scratch tmpfs; "" for none.
    - `result`: the file whose bytes come back as `StageOutcome.result`: relative to the
      working folder (`metrics.json`) or in `output` (`/scores/scores.json`).
    - `environment`: variables added to the sandbox's fixed environment.
    - `collect`: an empty host folder of the worker's that receives the output folder's
      folders and regular files once the program ended (links and special files are left
      out; bounded by `limits.scratch_bytes`), e.g. the run stage's predictions, mounted
      read-only into the score stage. None: only the result file comes back.
    - `readonly_work`: the working folder is `files` itself, read-only (bubblewrap only),
      instead of a writable copy.
    """

    name: str
    program: tuple[str, ...]
    files: Path
    limits: Limits
    mounts: Mapping[str, Path] = field(default_factory=dict)
    output: str = ""
    result: str = METRICS_FILE
    environment: Mapping[str, str] = field(default_factory=dict)
    collect: Path | None = None
    readonly_work: bool = False


@dataclass(frozen=True)
class StageOutcome:
    """What one stage did. `exit_code` is negative for a fatal signal (`signal` names it);
    `result` holds the bytes of a regular result file, or None with `result_problem` saying
    why there are none; `error` is set when the sandbox stopped the program (too much output)
    or could not start or report; `limits_hit` names the `Limits` fields that ended it;
    `output_dir` is the host folder holding the stage's output folder, when collected."""

    stage: str
    exit_code: int | None
    timed_out: bool
    logs: str
    wall_seconds: float
    result: bytes | None = None
    result_problem: str = ""
    error: str = ""
    limits_hit: tuple[str, ...] = ()
    output_dir: Path | None = None

    @property
    def signal(self) -> int | None:
        return -self.exit_code if self.exit_code is not None and self.exit_code < 0 else None

    @property
    def ok(self) -> bool:
        """The program ran to its end and exited 0 (its result is read whatever it holds)."""
        return self.exit_code == 0 and not (self.timed_out or self.error)


def stage_outcome(stage: str, outcome: Outcome, *, collect: Path | None = None) -> StageOutcome:
    """The isolation package's `Outcome` as the stage's (`collect`: where the output folder
    was asked to go)."""
    hit = [outcome.limit] if outcome.limit in (WALL, OUTPUT, SCRATCH) else []
    code = outcome.exit_code
    if code is not None and code < 0 and -code in _SIGNAL_LIMITS:
        hit.append(_SIGNAL_LIMITS[signal.Signals(-code)])
    return StageOutcome(
        stage=stage,
        exit_code=code,
        timed_out=outcome.timed_out,
        logs=outcome.logs,
        wall_seconds=outcome.wall_seconds,
        result=outcome.metrics,
        result_problem=outcome.metrics_problem,
        error=outcome.error,
        limits_hit=tuple(hit),
        output_dir=None if outcome.error or outcome.timed_out else collect,
    )


class StageBackend(Protocol):
    """Runs one stage to its end and never raises for anything its program does."""

    name: ClassVar[str]

    def run(
        self, spec: StageSpec, *, on_logs: Callable[[str], None] | None = None
    ) -> StageOutcome: ...


@dataclass(frozen=True)
class BubblewrapBackend:
    """Each stage in a new bubblewrap sandbox (`apps.grading.isolation`)."""

    bwrap: str
    python: str
    readonly_paths: tuple[str, ...] = ()
    name: ClassVar[str] = BUBBLEWRAP

    def run(self, spec: StageSpec, *, on_logs: Callable[[str], None] | None = None) -> StageOutcome:
        return _run(self.name, spec, self.python, self.readonly_paths, self.bwrap, on_logs)


@dataclass(frozen=True)
class UnisolatedBackend:
    """Each stage directly in its working folder, under the same rlimits, uid and environment
    but no namespaces: a development machine only. A stage with mounts or an output folder
    cannot run here (its outcome says so)."""

    python: str
    name: ClassVar[str] = NONE

    def run(self, spec: StageSpec, *, on_logs: Callable[[str], None] | None = None) -> StageOutcome:
        return _run(self.name, spec, self.python, (), None, on_logs)


def _run(
    isolation: str,
    spec: StageSpec,
    python: str,
    readonly_paths: tuple[str, ...],
    bwrap: str | None,
    on_logs: Callable[[str], None] | None,
) -> StageOutcome:
    outcome = run_program(
        isolation=isolation,
        bwrap=bwrap,
        input_dir=spec.files,
        program=spec.program,
        limits=spec.limits,
        python=python,
        readonly_paths=readonly_paths,
        on_output=on_logs,
        mounts=spec.mounts,
        output=spec.output,
        result=spec.result,
        environment=spec.environment,
        collect=spec.collect,
        readonly_work=spec.readonly_work,
    )
    return stage_outcome(spec.name, outcome, collect=spec.collect)


def pipeline_run(
    stages: Sequence[StageSpec], *, backend: StageBackend, on_logs: StageLogs | None = None
) -> list[StageOutcome]:
    """Run `stages` in order with `backend`; stop after the first that is not `ok`. Returns
    the outcomes of the stages that ran. `on_logs(stage, logs so far)` is called while each
    runs (live logs); who may see which stage's logs is the caller's decision."""
    outcomes: list[StageOutcome] = []
    for spec in stages:
        sink = None if on_logs is None else functools.partial(on_logs, spec.name)
        outcome = backend.run(spec, on_logs=sink)
        outcomes.append(outcome)
        if not outcome.ok:
            break
    return outcomes
