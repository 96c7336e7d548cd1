"""Received uploads built in the test, for calling the submission services without HTTP."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from apps.submissions.uploads import IncomingFile

IncomingMaker = Callable[..., IncomingFile]


@contextmanager
def incoming_files() -> Iterator[IncomingMaker]:
    """A maker of what the upload handler hands the services (the raw name, the bytes on local
    disk, their size and sha256); every file it made is closed on exit, as the view does."""
    made: list[IncomingFile] = []

    def make(name: str, content: bytes = b"print('hi')\n") -> IncomingFile:
        upload = IncomingFile(raw_name=name, content_type="application/octet-stream", charset=None)
        upload.write(content)
        upload.seek(0)
        upload.size = len(content)
        upload.sha256 = hashlib.sha256(content).hexdigest()
        made.append(upload)
        return upload

    try:
        yield make
    finally:
        for upload in made:
            upload.close()
