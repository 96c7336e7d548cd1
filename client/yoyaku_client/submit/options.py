"""What a submission is asked (`SubmitOptions`) and what it answers (`SubmitResult`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yoyaku_client.models import JobSubmission
from yoyaku_client.record import Record


@dataclass(frozen=True, eq=False, repr=False)
class SubmitOptions(Record):
    """What `Submitter.run` is asked to send, and how."""

    paths: Sequence[Path]
    entrypoint: str = "main.py"
    config_file: str = "config.yaml"
    question_id: str = ""
    skill: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    job_config: Mapping[str, Any] | None = None
    idempotency_key: str | None = None
    reserve: bool = False
    reserve_ttl: int = 300
    local_checks: bool = True
    #: When the key's job failed or was cancelled, make a new job (under `retry_key`).
    retry: bool = False
    #: A challenge's phase (both or neither; then no question or skill).
    challenge: str = ""
    phase: str = ""
    #: A predictions phase's file types: the files' extensions, and no program to run.
    file_types: Sequence[str] | None = None
    #: Files sent at once after the draft's first: the next file's bytes travel while the
    #: server keeps the one before (1: one after the other).
    parallel: int = 2


@dataclass(frozen=True, eq=False, repr=False)
class FileOutcome(Record):
    """What happened to one file of a submission."""

    filename: str
    size: int
    sha256: str
    #: "uploaded", "already stored" (a resumed upload), "replayed" (the server had it: 200) or
    #: "resumed" (a large file's resumable upload carried on from the server's offset)
    action: str


@dataclass(frozen=True, eq=False, repr=False)
class SubmitResult(Record):
    """What `Submitter.run` did: the submission, its job and each file's outcome."""

    submission_id: str
    job: JobSubmission
    idempotency_key: str
    #: The key already named a job before this command ran (a re-run, e.g. CI on one commit).
    matched_existing: bool
    #: This command continued a draft left by an earlier, interrupted one.
    resumed: bool
    files: list[FileOutcome]
    reservation_id: str | None
    left_out: list[str]
    #: With `retry`: the failed or cancelled jobs this run followed to reach its key.
    retried: list[str] = field(default_factory=list)
