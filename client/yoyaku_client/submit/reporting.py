"""What a submission tells its user; the CLI draws progress bars or prints lines."""

from __future__ import annotations

from collections.abc import Sequence

from yoyaku_client.submit.packing import LocalFile


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
