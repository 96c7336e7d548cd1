"""The S3 parts of one append sent on a thread of their own while the body is read.

A bounded hand-over: at most one part in flight while the request thread fills the next one
(on disk). Handing over a part waits for the one in flight, so a slow store slows the
append instead of piling parts up in memory. The first failure stops the sending: every later
hand-over, and the end of the append (`close`), raises UploadStorageUnavailable, and the part
that failed stays in its tail file (its bytes are stored locally, a later append sends it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from apps.submissions.exceptions import UploadStorageUnavailable

logger = logging.getLogger(__name__)

SendPart = Callable[[int, Path], None]


class PartSender:
    """`submit(number, path)` hands a whole part over; `drain()` waits until it is sent;
    `close()` waits, ends the thread and raises a failure not raised yet."""

    def __init__(self, send: SendPart, *, name: str) -> None:
        self._send = send
        self._name = name
        self._cond = threading.Condition()
        self._job: tuple[int, Path] | None = None
        self._error: BaseException | None = None
        self._reported = False
        self._stopping = False
        self._thread: threading.Thread | None = None

    def submit(self, number: int, path: Path) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._job is None)
            self._raise()
            self._job = (number, path)
            self._cond.notify_all()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def drain(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._job is None)
            self._raise()

    def close(self, *, report: bool = True) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._job is None)
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if report:
            with self._cond:
                self._raise(again=False)

    def _raise(self, *, again: bool = True) -> None:
        if self._error is not None and not self._reported:
            self._reported = True
            raise UploadStorageUnavailable(
                "The storage did not take a part of the upload "
                f"({type(self._error).__name__}); ask for the upload's offset and resume."
            ) from self._error
        if self._error is not None and again:
            raise UploadStorageUnavailable()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._job is not None or self._stopping)
                if self._job is None:
                    return
                number, path = self._job
            error: BaseException | None = None
            try:
                self._send(number, path)
            except BaseException as exc:  # handed to the request thread
                logger.warning("Sending part %s of %s failed: %r", number, self._name, exc)
                error = exc
            with self._cond:
                if error is not None and self._error is None:
                    self._error = error
                self._job = None
                self._cond.notify_all()
