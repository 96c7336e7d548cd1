"""What the senders of one upload share (`Batch`): counts, outcomes, the state file, the
first failure, and the waits that let them take turns."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from yoyaku_client.config import UploadState
from yoyaku_client.submit.hashing import HashQueue
from yoyaku_client.submit.options import FileOutcome, SubmitOptions
from yoyaku_client.submit.packing import LocalFile


class Stopped(Exception):
    """A file's next attempt, not made: another file failed first."""


@dataclass
class Batch:
    """One upload's files under way: what each sender needs, and what they share. `lock`
    guards every field; `changed` (on the same lock) is told when a file ends, a sender
    starts waiting, or the batch stops."""

    key: str
    state: UploadState
    options: SubmitOptions
    hashes: HashQueue
    count: int
    started: int = 0
    finished: int = 0
    outcomes: dict[str, FileOutcome] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Set when a file failed (or the run was interrupted): a file not started yet is not
    #: sent, a file under way is not sent again.
    stopped: bool = False
    #: The first file's failure, raised once the files under way have ended.
    failure: BaseException | None = None
    #: One lock per large content (sha256, size): files with the same bytes share the state
    #: file of their resumable upload, so they are sent one after the other.
    contents: dict[tuple[str, int], threading.Lock] = field(default_factory=dict)
    #: Senders waiting for another file to end (`wait_for_room`).
    waiting: int = 0
    changed: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)

    def content_lock(self, item: LocalFile) -> threading.Lock:
        with self.lock:
            return self.contents.setdefault((item.sha256, item.size), threading.Lock())

    def stop(self, failure: BaseException | None = None) -> None:
        """No file starts from now on (`failure`: the first one's, when it is the first)."""
        with self.lock:
            self.stopped = True
            if self.failure is None:
                self.failure = failure
            self.changed.notify_all()

    def end(self) -> None:
        """A file ended (its outcome recorded); the caller holds `lock`."""
        self.finished += 1
        self.changed.notify_all()

    def wait_for_room(self, ended: int) -> bool:
        """After a sender's file was refused for the server's room (503), `ended` files having
        ended when it began: wait until another file ends, and say so (True: try again). False
        when nothing else is being sent (every other file under way waits too, or none is)
        and none ended since: the server is busy with others, and the refusal stands; or
        when the batch stopped."""
        with self.changed:
            self.waiting += 1
            self.changed.notify_all()
            try:
                self.changed.wait_for(
                    lambda: (
                        self.finished > ended
                        or self.stopped
                        or self.started - self.finished - self.waiting <= 0
                    )
                )
                return self.finished > ended and not self.stopped
            finally:
                self.waiting -= 1
