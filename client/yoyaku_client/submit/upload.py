"""Steps 4 to 6: hold a slot (kept alive while uploading), send the files one per request,
enqueue the job with the key; any failure releases the slot."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from yoyaku_client.client import Client
from yoyaku_client.config import ResumableState, UploadState
from yoyaku_client.endpoints.uploads import UploadLimits
from yoyaku_client.errors import ApiError, ConflictError, ServerError, YoyakuError
from yoyaku_client.models import FileInfo, Reservation, Submission, UploadedFile
from yoyaku_client.multipart import ProgressCallback
from yoyaku_client.submit.batch import Batch, Stopped
from yoyaku_client.submit.hashing import HashQueue
from yoyaku_client.submit.options import FileOutcome, SubmitOptions, SubmitResult
from yoyaku_client.submit.packing import LocalFile
from yoyaku_client.submit.reporting import Reporter


class _Extender:
    """Keeps a reservation alive while the upload runs (every third of its lifetime)."""

    def __init__(
        self, client: Client, reservation: Reservation, ttl: int, reporter: Reporter
    ) -> None:
        self.client = client
        self.reservation = reservation
        self.ttl = ttl
        self.reporter = reporter
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="yoyaku-extend", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        interval = max(1.0, self.ttl / 3)
        while not self._stop.wait(interval):
            try:
                self.client.extend_reservation(
                    self.reservation.reservation_id, ttl_seconds=self.ttl
                )
            except ApiError as exc:
                if exc.code == "reservation_not_active":
                    self.lost = True
                    self.reporter.warning(
                        f"reservation {self.reservation.reservation_id} is no longer active "
                        f"({exc.error}); the job will need a free slot"
                    )
                    return
            except YoyakuError:
                continue  # the next tick tries again; the reservation lives ttl seconds

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)


class UploadSteps:
    """Uploading and enqueueing (a part of `Submitter`)."""

    client: Client
    reporter: Reporter
    limits: UploadLimits
    username: str

    def _upload_and_enqueue(
        self,
        draft: Submission | None,
        key: str,
        state: UploadState,
        files: Sequence[LocalFile],
        options: SubmitOptions,
        left_out: list[Path],
        hashes: HashQueue,
    ) -> SubmitResult:
        reservation: Reservation | None = None
        extender: _Extender | None = None
        consumed = False
        try:
            if options.reserve:
                reservation = self.client.reserve(ttl_seconds=options.reserve_ttl)
                self.reporter.message(
                    f"reserved a job slot ({reservation.reservation_id}) while uploading"
                )
                extender = _Extender(self.client, reservation, options.reserve_ttl, self.reporter)
                extender.start()
            submission_id, outcomes = self._upload(draft, key, state, files, options, hashes)
            if extender is not None:
                extender.stop()
            reservation_id = reservation.reservation_id if reservation else None
            if extender is not None and extender.lost:
                reservation_id = None
            state.reservation_id = reservation_id or ""
            state.save()
            try:
                job = self.client.submit_job(
                    submission_id,
                    config=options.job_config,
                    idempotency_key=key,
                    reservation_id=reservation_id,
                )
            except ConflictError as exc:
                if exc.code != "reservation_not_active" or reservation_id is None:
                    raise
                self.reporter.warning(
                    f"the reservation expired ({exc.error}); asking for a free slot"
                )
                state.reservation_id = ""
                state.save()
                job = self.client.submit_job(
                    submission_id, config=options.job_config, idempotency_key=key
                )
            consumed = True
            state.job_id = job.job_id
            state.save()
        finally:
            if extender is not None:
                extender.stop()
            if reservation is not None and not consumed:
                with contextlib.suppress(YoyakuError):
                    self.client.release_reservation(reservation.reservation_id)
                    self.reporter.message(f"released reservation {reservation.reservation_id}")
        return SubmitResult(
            submission_id=submission_id,
            job=job,
            idempotency_key=key,
            matched_existing=job.idempotent_hit and job.attempts == 1,
            resumed=draft is not None,
            files=outcomes,
            reservation_id=reservation.reservation_id if reservation else None,
            left_out=[str(p) for p in left_out],
        )

    def _upload(
        self,
        draft: Submission | None,
        key: str,
        state: UploadState,
        files: Sequence[LocalFile],
        options: SubmitOptions,
        hashes: HashQueue,
    ) -> tuple[str, list[FileOutcome]]:
        stored: dict[str, FileInfo] = {}
        if draft is not None:
            stored = {f.filename.lower(): f for f in self.client.list_files(draft.submission_id)}
            self.reporter.message(
                f"continuing draft {draft.submission_id}: {len(stored)}/{len(files)} files "
                "already stored"
            )
        todo = [f for f in files if f.name.lower() not in stored]
        large = self.limits.max_upload_file_size
        if draft is None:  # the draft is created with a file sent whole: a small one first
            # (when every file is large, from the first one's resumable upload)
            first = next((f for f in todo if f.size <= large), None)
            if first is not None:
                todo = [first, *(f for f in todo if f is not first)]
        # Hashes are known for every file by now except when uploading to a new draft with an
        # explicit key: there each is awaited just before its file is sent.
        batch = Batch(key, state, options, hashes, count=len(files))
        batch.started = batch.finished = len(files) - len(todo)
        for f in files:
            if f.name.lower() in stored:
                batch.outcomes[f.name] = FileOutcome(f.name, f.size, f.sha256, "already stored")
        self.reporter.upload_started(todo, already=len(files) - len(todo))
        try:
            submission_id = draft.submission_id if draft is not None else ""
            if not submission_id and todo:  # the draft first, from its first file
                submission_id = self._send(batch, todo[0], "")
                todo = todo[1:]
            self._send_all(batch, todo, submission_id)
        finally:
            self.reporter.upload_finished()
        return submission_id, [batch.outcomes[f.name] for f in files]

    def _send_all(self, batch: Batch, items: Sequence[LocalFile], submission_id: str) -> None:
        """Send `items` to the draft, `options.parallel` at a time: the next file starts as
        soon as one ends, so its bytes travel while the server keeps the one before. The first
        failure is raised once the files under way have ended (their outcomes in the state
        file); from that failure on, no file starts and none under way is sent again."""
        parallel = min(max(1, batch.options.parallel), len(items))
        if parallel <= 1:
            for item in items:
                self._send(batch, item, submission_id)
            return
        pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="yoyaku-upload")
        try:
            futures = [
                pool.submit(self._send_or_stop, batch, item, submission_id) for item in items
            ]
            for future in as_completed(futures):
                if future.exception() is not None:
                    break
            pool.shutdown(wait=True, cancel_futures=True)
        except BaseException:  # Ctrl-C: the process ends; the files under way are dropped
            batch.stop()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        if batch.failure is not None:
            raise batch.failure

    def _send_or_stop(self, batch: Batch, item: LocalFile, submission_id: str) -> None:
        """`_send` in a pool's thread. A failure stops the batch at once, before the pool's
        thread takes the next file (which the main thread could not cancel in time), and is
        kept as the batch's when it is the first."""
        try:
            self._send(batch, item, submission_id)
        except Stopped:
            return  # another file failed first: that failure is the batch's
        except BaseException as exc:
            batch.stop(exc)
            raise

    def _send(self, batch: Batch, item: LocalFile, submission_id: str) -> str:
        """Send one file (to `submission_id`, or as the new draft's first file when empty);
        the draft's id. Called from several threads: `batch.lock` guards the counts, the
        outcomes and the state file, and the reporter's calls."""
        batch.hashes.digest(item)
        with batch.lock:
            if batch.stopped:
                return submission_id  # another file failed: this one is not sent
            batch.started += 1
            self.reporter.file_started(item, batch.started, batch.count)

        def progress(sent: int, total: int) -> None:
            with batch.lock:
                if sent == 0 and batch.stopped:  # an attempt begins: not after a failure
                    raise Stopped
                self.reporter.file_progress(item, sent, total)

        options = batch.options
        large = self.limits.max_upload_file_size
        action = "uploaded"
        if submission_id and item.size > large:
            # Another file with these bytes would carry on the same upload at once, and only
            # one of the two could become a file: the second starts once the first is attached.
            with batch.content_lock(item):
                uploaded, action = self._send_resumable(submission_id, item, progress)
            created = uploaded.created
        elif item.size > large:  # every file is large: the draft starts from an upload
            submission, action = self._create_from_resumable(item, batch.key, options, progress)
            submission_id = submission.submission_id
            created = True
        elif not submission_id:
            submission = self.client.create_submission(
                [item.path],
                entrypoint=options.entrypoint,
                config_file=options.config_file,
                metadata=options.metadata,
                question_id=options.question_id,
                skill=options.skill,
                challenge=options.challenge,
                phase=options.phase,
                sha256=item.sha256,
                upload_key=batch.key,
                progress=progress,
            )
            submission_id = submission.submission_id
            created = True
        else:
            uploaded = self._upload_when_room(batch, submission_id, item, progress)
            created = uploaded.created
        with batch.lock:
            batch.state.submission_id = submission_id
            batch.state.files[item.name] = item.sha256
            batch.state.save()
            batch.end()
            batch.outcomes[item.name] = FileOutcome(
                item.name, item.size, item.sha256, action if created else "replayed"
            )
            self.reporter.file_finished(item, batch.finished, batch.count, created=created)
        return submission_id

    def _upload_when_room(
        self, batch: Batch, submission_id: str, item: LocalFile, progress: ProgressCallback
    ) -> UploadedFile:
        """`upload_file`. Refused 503 (the server holds too many of this client's bodies at
        once) while another file of this run is being sent: sent again as soon as one has
        ended, when its room is free, rather than after the server's `Retry-After`, so the
        run makes room for itself instead of failing. When no other file is being sent, the
        client's own policy (`Retry-After` honoured, its attempts). A quick try again always
        follows another file's end, so they are bounded by the files. (A resumable upload
        carries on from the server's offset with retries of its own.)"""
        policy = self.client.transport.retry
        at_once = dataclasses.replace(policy, retry_statuses=policy.retry_statuses - {503})
        quick = True
        while True:
            with batch.lock:
                ended = batch.finished
                # Others are (or are about to be) sent beside this file: it is neither the
                # last left nor sent one at a time (a file waiting for room is sent again).
                others = quick and min(batch.options.parallel, batch.count - batch.finished) > 1
            try:
                return self.client.upload_file(
                    submission_id,
                    item.path,
                    filename=item.name,
                    sha256=item.sha256,
                    progress=progress,
                    retry=at_once if others else None,
                )
            except ServerError as exc:
                if exc.status != 503:
                    raise
                if batch.wait_for_room(ended):
                    quick = True  # another file ended: its room is free
                    continue
                if not others:
                    raise  # the client's own policy ran out: the server is busy with others
                quick = False  # no other file is being sent: the client's own policy next

    def _send_resumable(
        self, submission_id: str, item: LocalFile, progress: ProgressCallback
    ) -> tuple[UploadedFile, str]:
        """A file over MAX_UPLOAD_FILE_SIZE: a resumable upload (carried on from the server's
        offset when an earlier run left one, found by the file's state), then attached."""
        upload_id, state, action = self._resumable(item, progress)
        uploaded = self.client.attach_upload(submission_id, upload_id, item.name)
        state.forget()
        return uploaded, action

    def _create_from_resumable(
        self, item: LocalFile, key: str, options: SubmitOptions, progress: ProgressCallback
    ) -> tuple[Submission, str]:
        """The first file of a new draft when no file is small enough to be sent whole: its
        resumable upload, then the draft created from it (with the key in its metadata, so a
        run killed after this finds the draft again)."""
        upload_id, state, action = self._resumable(item, progress)
        submission = self.client.create_submission_from_upload(
            upload_id,
            item.name,
            entrypoint=options.entrypoint,
            config_file=options.config_file,
            metadata=options.metadata,
            question_id=options.question_id,
            skill=options.skill,
            challenge=options.challenge,
            phase=options.phase,
            upload_key=key,
        )
        state.forget()
        return submission, action

    def _resumable(
        self, item: LocalFile, progress: ProgressCallback
    ) -> tuple[str, ResumableState, str]:
        """Upload `item` resumably: its upload's id, its state (to forget once the upload
        became a file) and the action ("resumed" or "uploaded")."""
        state = ResumableState.load(self.client.base_url, self.username, item.sha256, item.size)
        if state.upload_id:
            self.reporter.message(f"{item.name}: carrying on with upload {state.upload_id}")
        status = self.client.upload_resumable(
            item.path, upload_id=state.upload_id or None, progress=progress, on_created=state.save
        )
        if status.resumed_from:
            self.reporter.message(
                f"{item.name}: resumed at byte {status.resumed_from} of {item.size} (the "
                "server had stored the bytes before it)"
            )
        if status.sha256 and status.sha256 != item.sha256:
            state.forget()
            raise YoyakuError(
                f"{item.name}: the server stored bytes whose sha256 is {status.sha256}, not "
                f"{item.sha256}: the file changed while it was uploaded; run again"
            )
        return status.upload_id, state, "resumed" if status.resumed_from else "uploaded"
