"""`Submitter.run`: the whole flow of `yoyaku submit` (see the package's steps)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from yoyaku_client.client import Client
from yoyaku_client.config import UploadState
from yoyaku_client.errors import ConflictError, IdempotencyKeyReused
from yoyaku_client.models import Submission
from yoyaku_client.submit.hashing import HashQueue, default_idempotency_key
from yoyaku_client.submit.options import SubmitOptions, SubmitResult
from yoyaku_client.submit.packing import LocalFile, check_files, check_sizes, collect_files
from yoyaku_client.submit.reporting import Reporter
from yoyaku_client.submit.resume import RETRY_STATUSES, ResumeSteps, retry_key
from yoyaku_client.submit.upload import UploadSteps


class Submitter(ResumeSteps, UploadSteps):
    """Runs one `yoyaku submit` through `client`, telling `reporter` what it does."""

    def __init__(self, client: Client, reporter: Reporter | None = None) -> None:
        self.client = client
        self.reporter = reporter or Reporter()

    def run(self, options: SubmitOptions) -> SubmitResult:
        files, left_out = collect_files(options.paths, extensions=options.file_types)
        if options.local_checks:
            check_files(
                files,
                entrypoint=options.entrypoint,
                config_file=options.config_file,
                extensions=options.file_types,
                sizes=False,
            )
        explicit = options.idempotency_key is not None
        # Hashing starts now, beside the first requests; should the server's size limits
        # refuse a file, closing the queue stops it within one read.
        self.reporter.hashing_started(sum(f.size for f in files))
        hashes = HashQueue(
            files,
            progress=self.reporter.hashing_advanced,
            done=self.reporter.hashing_finished,
            workers=1 if explicit else min(4, os.cpu_count() or 1, max(1, len(files))),
        )
        try:
            # Who we are (for the key and the state file) is asked beside the limits; an
            # explicit key's submissions are looked up on the server at the same time (what the
            # state file does not name is looked up there in any case).
            listed: Future[list[Submission]] | None = None
            with ThreadPoolExecutor(max_workers=2, thread_name_prefix="yoyaku-me") as pool:
                asked = pool.submit(self.client.me)
                if options.idempotency_key is not None:
                    listed = pool.submit(self._find_on_server, options.idempotency_key)
                self.limits = self.client.upload_limits()
                if options.local_checks:
                    check_sizes(
                        files,
                        max_size=self.limits.max_upload_file_size,
                        resumable_max=self.limits.max_resumable_upload_size,
                    )
                me = asked.result()
            self.username = me.username
            if options.idempotency_key is None:
                hashes.wait_all()
            key = options.idempotency_key or default_idempotency_key(
                username=me.username,
                files=files,
                entrypoint=options.entrypoint,
                config_file=options.config_file,
                question_id=options.question_id,
                skill=options.skill,
                metadata=options.metadata,
                job_config=options.job_config,
                phase=(options.challenge, options.phase),
            )
            retried: list[str] = []
            while True:
                state = UploadState.load(self.client.base_url, me.username, key)
                found_early = listed if key == options.idempotency_key else None
                existing = self._find(key, state, listed=found_early)
                if existing:  # comparing with what is stored needs every hash
                    hashes.wait_all()
                sealed = next((s for s in existing if s.status != "draft"), None)
                if sealed is None:
                    break
                replay = self._replay(sealed, key, state, files, options, left_out)
                if not options.retry or replay.job.status not in RETRY_STATUSES:
                    return dataclasses.replace(replay, retried=retried)
                retried.append(replay.job.job_id)
                self.reporter.message(
                    f"job {replay.job.job_id} of these files was {replay.job.status}: retrying"
                )
                key = retry_key(key, replay.job.job_id)
            draft = next((s for s in existing if self._compatible(s, files, options)), None)
            if existing and draft is None:
                self.reporter.message(
                    f"draft {existing[0].submission_id} of this key holds other files or "
                    "settings; starting a new submission"
                )
            try:
                result = self._upload_and_enqueue(
                    draft, key, state, files, options, left_out, hashes
                )
            except (IdempotencyKeyReused, ConflictError) as exc:
                # Another run of the key sealed first: its own draft (the job's key is taken)
                # or the draft both carried on (a file sent after the seal is refused).
                if isinstance(exc, ConflictError) and exc.code != "submission_sealed":
                    raise
                twin = self._twin(key, state, files, options, left_out)
                if twin is None:
                    raise
                result = twin
            return dataclasses.replace(result, retried=retried)
        finally:
            hashes.close()

    def _twin(
        self,
        key: str,
        state: UploadState,
        files: Sequence[LocalFile],
        options: SubmitOptions,
        left_out: list[Path],
    ) -> SubmitResult | None:
        """The job of the key was refused for this run's draft, or a file for the draft it
        carried on: another run of the key (at the same time) sealed first. When its
        submission holds these files, its job is this run's (replayed, as a later run would);
        else None (the refusal stands)."""
        ours = {f.name.lower(): f.sha256 for f in files}
        for found in self._find_on_server(key):
            stored = {f.filename.lower(): f.sha256 for f in found.files}
            if found.status != "draft" and stored == ours:
                self.reporter.message(
                    f"another run of the key {key} sealed submission {found.submission_id} "
                    f"first; draft {state.submission_id} is left to expire"
                )
                state.submission_id = found.submission_id
                state.reservation_id = ""  # ours was released: the job was made without it
                state.save()
                return self._replay(found, key, state, files, options, left_out)
        return None
