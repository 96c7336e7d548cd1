"""`yoyaku submit` without the terminal: collect, check, hash, resume, upload, enqueue.

The order of a submission (an optional quota reservation, then one file per request):

1. collect the files (a folder is walked) and refuse, before any request, what the server
   would refuse (name, extension, size, duplicates, count, entrypoint and config present);
2. hash them (in parallel) and derive the idempotency key, unless one is given:
   `yoyaku-` + sha256 over the user, the files' names and hashes and the configuration;
3. look for the submission of that key: the local state file first, then the server's list
   (a submission's metadata carries the key as `yoyaku_upload_key`); a sealed one means the
   job exists, and it is replayed instead of made again;
4. with `reserve`, hold a quota slot, extended in the background while the upload runs;
5. create the draft with the first file (or continue the one found), then send the other
   files one per request with `X-Content-SHA256`, skipping those the server already stores
   with the same hash; the state file follows every step;
6. create the job with the key (and the reservation); any failure releases the reservation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import os
import threading
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yoyaku_client.client import UPLOAD_KEY_FIELD, Client
from yoyaku_client.config import UploadState
from yoyaku_client.errors import ApiError, ConflictError, IdempotencyKeyReused, YoyakuError
from yoyaku_client.models import FileInfo, JobSubmission, Reservation, Submission

__all__ = [
    "LocalFile",
    "LocalRefusal",
    "Reporter",
    "SubmitOptions",
    "SubmitResult",
    "Submitter",
    "collect_files",
    "default_idempotency_key",
]

DEFAULT_EXTENSIONS = (".py", ".yaml", ".zip", ".tar.gz")
MAX_FILE_SIZE = 104_857_600
MAX_FILES = 100
HASH_CHUNK = 4 * 1024 * 1024
#: How far back the server's list is searched for the submission of a key: the server's key
#: lifetime (IDEMPOTENCY_KEY_TTL_HOURS, 24 h by default).
KEY_LOOKBACK = dt.timedelta(hours=24)
_SKIPPED_DIRS = {"__pycache__", "node_modules"}
# The server's display rule for names: characters that draw as `/` or `\`, and the
# categories of invisible characters (controls, format characters, line separators).
_SLASH_LOOKALIKES = frozenset(
    "\u2044\u2215\u2216\u2571\u2572\u27cb\u27cd\u29f5\u29f8\u29f9\ufe68\uff0f\uff3c"
)
_HIDDEN_CATEGORIES = {"Cc", "Cf", "Zl", "Zp"}


def allowed_extensions() -> tuple[str, ...]:
    """The server's ALLOWED_UPLOAD_EXTENSIONS (its default unless YOYAKU_ALLOWED_EXTENSIONS
    names another list, for a server configured differently)."""
    raw = os.environ.get("YOYAKU_ALLOWED_EXTENSIONS", "")
    items = [e.strip().lower() for e in raw.split(",") if e.strip()]
    return tuple(e if e.startswith(".") else f".{e}" for e in items) or DEFAULT_EXTENSIONS


def max_file_size() -> int:
    raw = os.environ.get("YOYAKU_MAX_FILE_SIZE", "")
    return int(raw) if raw.isdigit() else MAX_FILE_SIZE


class LocalRefusal(YoyakuError):
    """The files would be refused by the server: nothing was sent."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


@dataclass
class LocalFile:
    path: Path
    name: str
    size: int
    sha256: str = ""


def _has_allowed_extension(name: str, extensions: Sequence[str]) -> bool:
    lower = name.lower()
    return any(lower.endswith(ext) and len(lower) > len(ext) for ext in extensions)


def name_problem(name: str) -> str | None:
    """The server's name rule (a plain base name), checked before the extension."""
    if name in {"", ".", ".."} or "/" in name or "\\" in name or ".." in name:
        return "not a plain file name"
    if any(unicodedata.category(c) == "Cc" for c in name):
        return "control characters in the name"
    for char in name:
        if char in _SLASH_LOOKALIKES or unicodedata.category(char) in _HIDDEN_CATEGORIES:
            return f"U+{ord(char):04X} in the name (invisible, or looks like '/' or '\\')"
    folded = unicodedata.normalize("NFKC", name)
    if "/" in folded or "\\" in folded or ".." in folded:
        return "reads as a path once normalised (NFKC)"
    if len(name.encode("utf-8")) > 255:
        return "longer than 255 bytes"
    if len(name) >= 2 and name[1] == ":" and name[0].isalpha():
        return "starts with a drive letter"
    return None


def collect_files(paths: Sequence[Path]) -> tuple[list[LocalFile], list[Path]]:
    """The files to send, in order, and the files of walked folders left out.

    A named file is always taken (and checked). A folder is walked in name order: files with
    an allowed extension are taken, others are left out (and listed); hidden entries and
    `__pycache__` are ignored; a sub-folder holding files to send is refused, because the
    server stores plain names (pack it as a .zip or .tar.gz).
    """
    extensions = allowed_extensions()
    files: list[LocalFile] = []
    left_out: list[Path] = []
    problems: list[str] = []
    for given in paths:
        if given.is_dir():
            for entry in sorted(given.iterdir(), key=lambda p: p.name):
                if entry.name.startswith(".") or entry.name in _SKIPPED_DIRS:
                    continue
                if entry.is_dir():
                    nested = [
                        p
                        for p in entry.rglob("*")
                        if p.is_file() and _has_allowed_extension(p.name, extensions)
                    ]
                    if nested:
                        problems.append(
                            f"{entry}: sub-folders cannot be uploaded (the server keeps plain "
                            "file names); pack it as a .zip or .tar.gz"
                        )
                    continue
                if entry.is_file():
                    if _has_allowed_extension(entry.name, extensions):
                        files.append(LocalFile(entry, entry.name, entry.stat().st_size))
                    else:
                        left_out.append(entry)
        elif given.is_file():
            files.append(LocalFile(given, given.name, given.stat().st_size))
        else:
            problems.append(f"{given}: no such file or folder")
    if problems:
        raise LocalRefusal(problems)
    return files, left_out


def check_files(files: Sequence[LocalFile], *, entrypoint: str, config_file: str) -> None:
    """Refuse, before any request, what the server would refuse."""
    extensions = allowed_extensions()
    limit = max_file_size()
    problems: list[str] = []
    if not files:
        problems.append("no files to send")
    seen: dict[str, Path] = {}
    for item in files:
        problem = name_problem(item.name)
        if problem is None and not _has_allowed_extension(item.name, extensions):
            problem = f"extension not allowed (allowed: {' '.join(extensions)})"
        if problem is None and item.size > limit:
            problem = f"{item.size} bytes, more than the limit of {limit}"
        if problem is None and item.name.lower() in seen:
            problem = f"same name as {seen[item.name.lower()]} (names are compared ignoring case)"
        if problem:
            problems.append(f"{item.path}: {problem}")
        seen.setdefault(item.name.lower(), item.path)
    if len(files) > MAX_FILES:
        problems.append(f"{len(files)} files: a submission holds at most {MAX_FILES}")
    names = {f.name for f in files}
    for role, name in (("entrypoint", entrypoint), ("config file", config_file)):
        if files and name not in names:
            problems.append(f"the {role} {name!r} is not among the files")
    if problems:
        raise LocalRefusal(problems)


def _sha256_file(path: Path, progress: Callable[[int], None] | None) -> str:
    digest = hashlib.sha256()
    buffer = bytearray(HASH_CHUNK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while True:
            count = handle.readinto(buffer)
            if not count:
                break
            digest.update(view[:count])  # hashlib releases the GIL on large buffers
            if progress is not None:
                progress(count)
    return digest.hexdigest()


class HashQueue:
    """Hashes the files in the background, in the given order; `digest(item)` waits for one
    file, `wait_all()` for every file.

    With an explicit idempotency key only file i's hash is needed before file i is sent
    (`X-Content-SHA256`), so one thread hashes ahead while earlier files upload; a derived key
    needs every hash first, so several threads share the work (hashlib releases the GIL).
    """

    def __init__(
        self,
        files: Sequence[LocalFile],
        *,
        progress: Callable[[int], None] | None = None,
        done: Callable[[], None] | None = None,
        workers: int = 1,
    ) -> None:
        self._lock = threading.Lock()
        self._progress = progress
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, workers), thread_name_prefix="yoyaku-hash"
        )
        self._futures: dict[int, Future[str]] = {}
        for item in files:
            if not item.sha256:
                self._futures[id(item)] = self._pool.submit(_sha256_file, item.path, self._report)
        self._items = list(files)
        self._remaining = len(self._futures)
        self._done = done
        if not self._futures and done is not None:
            done()
        for future in self._futures.values():
            future.add_done_callback(self._finished_one)

    def _report(self, count: int) -> None:
        if self._progress is not None:
            with self._lock:
                self._progress(count)

    def _finished_one(self, future: Future[str]) -> None:
        with self._lock:
            self._remaining -= 1
            last = self._remaining == 0
        if last and self._done is not None:
            self._done()

    def digest(self, item: LocalFile) -> str:
        future = self._futures.get(id(item))
        if future is not None and not item.sha256:
            item.sha256 = future.result()
        return item.sha256

    def wait_all(self) -> None:
        for item in self._items:
            self.digest(item)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def hash_files(
    files: Sequence[LocalFile], *, progress: Callable[[int], None] | None = None, workers: int = 0
) -> None:
    """Fill in each file's sha256, several files at once."""
    count = workers or min(4, os.cpu_count() or 1, max(1, len(files)))
    queue = HashQueue(files, progress=progress, workers=count)
    try:
        queue.wait_all()
    finally:
        queue.close()


def default_idempotency_key(
    *,
    username: str,
    files: Sequence[LocalFile],
    entrypoint: str,
    config_file: str,
    question_id: str,
    skill: str,
    metadata: Mapping[str, Any],
    job_config: Mapping[str, Any] | None,
) -> str:
    """Same user, same files (names and contents), same configuration → same key; so running
    the same command again, in CI or after a crash, never makes a second job."""
    document = {
        "user": username,
        "files": sorted([f.name, f.sha256] for f in files),
        "entrypoint": entrypoint,
        "config_file": config_file,
        "question_id": question_id,
        "skill": skill,
        "metadata": dict(metadata),
        "config": dict(job_config) if job_config is not None else None,
    }
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return "yoyaku-" + hashlib.sha256(text.encode()).hexdigest()[:40]


class Reporter:
    """What the submission tells its user; the CLI draws progress bars or prints lines.
    Every method is a no-op here."""

    def message(self, text: str) -> None:
        """A step worth telling (found a draft, skipped a file, created the job...)."""

    def warning(self, text: str) -> None:
        """Quota and cost warnings, a reservation lost..."""

    def hashing_started(self, total_bytes: int) -> None: ...

    def hashing_advanced(self, count: int) -> None: ...

    def hashing_finished(self) -> None: ...

    def upload_started(self, files: Sequence[LocalFile], already: int) -> None:
        """`files` are those still to send; `already` were on the server before."""

    def file_started(self, item: LocalFile, index: int, count: int) -> None: ...

    def file_progress(self, item: LocalFile, sent: int, total: int) -> None: ...

    def file_finished(self, item: LocalFile, index: int, count: int, *, created: bool) -> None: ...

    def upload_finished(self) -> None: ...

    def close(self) -> None:
        """The command is over (also after an error)."""


@dataclass(frozen=True)
class SubmitOptions:
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


@dataclass(frozen=True)
class FileOutcome:
    filename: str
    size: int
    sha256: str
    #: "uploaded", "already stored" (a resumed upload) or "replayed" (the server had it: 200)
    action: str


@dataclass(frozen=True)
class SubmitResult:
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


RETRY_STATUSES = frozenset({"failed", "cancelled"})


def retry_key(key: str, job_id: str) -> str:
    """The key of a retry of `job_id`, which ran under `key`: derived from both, so running
    the same `--retry` command again (a lost answer, Ctrl-C) finds the one retry job instead of
    making another, and a retry that fails too is retried under a key of its own."""
    digest = hashlib.sha256(f"{key}\n{job_id}".encode()).hexdigest()[:40]
    return f"yoyaku-retry-{digest}"


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


class Submitter:
    def __init__(self, client: Client, reporter: Reporter | None = None) -> None:
        self.client = client
        self.reporter = reporter or Reporter()

    # --- the whole flow ---------------------------------------------------------------------

    def run(self, options: SubmitOptions) -> SubmitResult:
        files, left_out = collect_files(options.paths)
        if options.local_checks:
            check_files(files, entrypoint=options.entrypoint, config_file=options.config_file)
        explicit = options.idempotency_key is not None
        self.reporter.hashing_started(sum(f.size for f in files))
        hashes = HashQueue(
            files,
            progress=self.reporter.hashing_advanced,
            done=self.reporter.hashing_finished,
            workers=1 if explicit else min(4, os.cpu_count() or 1, max(1, len(files))),
        )
        try:
            me = self.client.me()
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
            )
            retried: list[str] = []
            while True:
                state = UploadState.load(self.client.base_url, me.username, key)
                existing = self._find(key, state)
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
            result = self._upload_and_enqueue(draft, key, state, files, options, left_out, hashes)
            return dataclasses.replace(result, retried=retried)
        finally:
            hashes.close()

    # --- finding what an earlier run did -------------------------------------------------------

    def _find(self, key: str, state: UploadState) -> list[Submission]:
        """Submissions of this key, sealed ones first: the state file's, then the server's."""
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
            since = dt.datetime.now(dt.timezone.utc) - KEY_LOOKBACK
            found = self.client.find_submissions(upload_key=key, created_after=since)
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

    # --- upload and enqueue ---------------------------------------------------------------------

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
        # Hashes are known for every file by now except when uploading to a new draft with an
        # explicit key: there each is awaited just before its file is sent.
        outcomes: dict[str, FileOutcome] = {
            f.name: FileOutcome(f.name, f.size, f.sha256, "already stored")
            for f in files
            if f.name.lower() in stored
        }
        self.reporter.upload_started(todo, already=len(files) - len(todo))
        count = len(files)
        done = len(files) - len(todo)
        try:
            submission_id = draft.submission_id if draft is not None else ""
            for item in todo:
                hashes.digest(item)
                done += 1
                self.reporter.file_started(item, done, count)

                def progress(sent: int, total: int, item: LocalFile = item) -> None:
                    self.reporter.file_progress(item, sent, total)

                if not submission_id:
                    submission = self.client.create_submission(
                        [item.path],
                        entrypoint=options.entrypoint,
                        config_file=options.config_file,
                        metadata=options.metadata,
                        question_id=options.question_id,
                        skill=options.skill,
                        sha256=item.sha256,
                        upload_key=key,
                        progress=progress,
                    )
                    submission_id = submission.submission_id
                    state.submission_id = submission_id
                    created = True
                else:
                    uploaded = self.client.upload_file(
                        submission_id,
                        item.path,
                        filename=item.name,
                        sha256=item.sha256,
                        progress=progress,
                    )
                    created = uploaded.created
                state.files[item.name] = item.sha256
                state.save()
                outcomes[item.name] = FileOutcome(
                    item.name, item.size, item.sha256, "uploaded" if created else "replayed"
                )
                self.reporter.file_finished(item, done, count, created=created)
        finally:
            self.reporter.upload_finished()
        return submission_id, [outcomes[f.name] for f in files]
