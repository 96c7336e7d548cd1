"""Step 3: the submission of a key that an earlier run made: a draft to continue, or a sealed
one whose job is replayed (and, with `retry`, run again under a key of its own)."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path

from yoyaku_client.client import UPLOAD_KEY_FIELD, Client
from yoyaku_client.config import UploadState
from yoyaku_client.errors import ApiError, ConflictError, IdempotencyKeyReused
from yoyaku_client.models import JobSubmission, Submission
from yoyaku_client.submit.options import FileOutcome, SubmitOptions, SubmitResult
from yoyaku_client.submit.packing import LocalFile
from yoyaku_client.submit.reporting import Reporter

#: How far back the server's list is searched for the submission of a key: the server's key
#: lifetime (IDEMPOTENCY_KEY_TTL_HOURS, 24 h by default).
KEY_LOOKBACK = dt.timedelta(hours=24)
#: A sealed submission's job in one of these runs again with `retry`.
RETRY_STATUSES = frozenset({"failed", "cancelled"})


def retry_key(key: str, job_id: str) -> str:
    """The key of a retry of `job_id`, which ran under `key`: derived from both, so running
    the same `--retry` command again (a lost answer, Ctrl-C) finds the one retry job instead of
    making another, and a retry that fails too is retried under a key of its own."""
    digest = hashlib.sha256(f"{key}\n{job_id}".encode()).hexdigest()[:40]
    return f"yoyaku-retry-{digest}"


class ResumeSteps:
    """Finding what an earlier run did (a part of `Submitter`)."""

    client: Client
    reporter: Reporter

    def _find_on_server(self, key: str) -> list[Submission]:
        """The server's submissions of this key (created within the key's lifetime)."""
        since = dt.datetime.now(dt.timezone.utc) - KEY_LOOKBACK
        return self.client.find_submissions(upload_key=key, created_after=since)

    def _find(
        self, key: str, state: UploadState, *, listed: Future[list[Submission]] | None = None
    ) -> list[Submission]:
        """Submissions of this key, sealed ones first: the state file's, then the server's
        (`listed`: the server's, looked up already)."""
        found: list[Submission] = []
        if state.submission_id:
            try:
                submission = self.client.get_submission(state.submission_id)
            except ApiError as exc:
                if exc.status not in (403, 404):
                    raise
            else:
                if submission.metadata.get(UPLOAD_KEY_FIELD) == key:
                    found.append(submission)
        if not found:
            found = listed.result() if listed is not None else self._find_on_server(key)
        return sorted(found, key=lambda s: s.status == "draft")

    @staticmethod
    def _compatible(
        submission: Submission, files: Sequence[LocalFile], options: SubmitOptions
    ) -> bool:
        if submission.status != "draft":
            return False
        if (
            submission.entrypoint != options.entrypoint
            or submission.config_file != options.config_file
            or submission.question_id != options.question_id
            or submission.skill != options.skill
        ):
            return False
        ours = {f.name.lower(): f.sha256 for f in files}
        return all(ours.get(f.filename.lower()) == f.sha256 for f in submission.files)

    def _replay(
        self,
        submission: Submission,
        key: str,
        state: UploadState,
        files: Sequence[LocalFile],
        options: SubmitOptions,
        left_out: list[Path],
    ) -> SubmitResult:
        """The key's submission is sealed: its job exists. Ask the server for it with the same
        key and payload (an idempotent replay); should the payload no longer be known (a
        reservation of the first run, an expired key), find the job by its submission."""
        stored = {f.filename.lower(): f.sha256 for f in submission.files}
        if stored != {f.name.lower(): f.sha256 for f in files}:
            self.reporter.warning(
                f"the key {key} already names submission {submission.submission_id}, whose "
                "files differ from these; use another --idempotency-key for a new job"
            )
        reservation = (
            state.reservation_id if state.submission_id == submission.submission_id else None
        )
        try:
            job = self.client.submit_job(
                submission.submission_id,
                config=options.job_config,
                idempotency_key=key,
                reservation_id=reservation or None,
            )
        except (IdempotencyKeyReused, ConflictError):
            jobs = [
                j for j in self.client.list_jobs() if j.submission_id == submission.submission_id
            ]
            if not jobs:
                raise
            found = jobs[0]
            job = JobSubmission(
                job_id=found.job_id, status=found.status, idempotent_hit=True, idempotency_key=key
            )
        outcomes = [
            FileOutcome(f.filename, f.size, f.sha256, "already stored") for f in submission.files
        ]
        return SubmitResult(
            submission_id=submission.submission_id,
            job=job,
            idempotency_key=key,
            matched_existing=True,
            resumed=False,
            files=outcomes,
            reservation_id=None,
            left_out=[str(p) for p in left_out],
        )
