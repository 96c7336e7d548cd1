"""Step 2: the files' sha256 (in parallel, or one ahead of the upload) and the idempotency key
derived from them."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from yoyaku_client.submit.packing import LocalFile

HASH_CHUNK = 4 * 1024 * 1024


class _Stopped(Exception):
    """The queue was closed while this file was being hashed."""


def _sha256_file(
    path: Path, progress: Callable[[int], None] | None, stop: threading.Event | None = None
) -> str:
    digest = hashlib.sha256()
    buffer = bytearray(HASH_CHUNK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while True:
            if stop is not None and stop.is_set():
                raise _Stopped(str(path))
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
    `close()` stops a file being hashed within one read, so the queue may start before the
    files are known to be accepted.
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
        self._stop = threading.Event()
        self._futures: dict[int, Future[str]] = {}
        for item in files:
            if not item.sha256:
                self._futures[id(item)] = self._pool.submit(
                    _sha256_file, item.path, self._report, self._stop
                )
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
        self._stop.set()
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
    phase: tuple[str, str] = ("", ""),
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
    if any(phase):  # a key made before phases existed stays the same
        document["challenge"], document["phase"] = phase
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return "yoyaku-" + hashlib.sha256(text.encode()).hexdigest()[:40]
