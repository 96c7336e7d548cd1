"""Reading what a submission holds: the review detail, and downloading a file to disk.

A download is streamed to a temporary file beside its destination and checked against the
server's sha256 (`ETag`) before it takes its name; the name is never a path from the server:
`local_name` keeps only the last component and applies the name rule the server itself
applies to uploads (`submit.name_problem`), refusing `..`, separators, control characters
and look-alikes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from yoyaku_client.decode import ApiModel, api
from yoyaku_client.errors import YoyakuError
from yoyaku_client.models import User, lowercase
from yoyaku_client.transport import Transport

CHUNK = 256 * 1024


class UnsafeFileName(YoyakuError):
    """A name from the server that cannot be a local file name."""


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) else None


@dataclass(frozen=True, eq=False, repr=False)
class ArchiveMember(ApiModel):
    """An entry of a stored archive's listing."""

    name: str
    size: int
    type: str  # "file" or "folder"


@dataclass(frozen=True, eq=False, repr=False)
class StoredFile(ApiModel):
    """A stored file as the reader sees it: its text or its archive's listing."""

    id: int
    filename: str
    size: int
    sha256: str = field(metadata=api(decode=lowercase))
    download_url: str
    text: str | None = field(default=None, metadata=api(decode=_text))
    members: list[ArchiveMember] | None = None
    members_problem: str = ""


@dataclass(frozen=True, eq=False, repr=False)
class GradingAttempt(ApiModel):
    """One attempt at grading a submission."""

    number: int
    outcome: str
    exit_code: int | None = field(metadata=api(decode=_integer))
    score: float | None
    reason: str
    started_at: dt.datetime | None


@dataclass(frozen=True, eq=False, repr=False)
class ReviewDetail(ApiModel):
    """`GET /api/review/submissions/{id}/`: what a reviewer reads before a verdict."""

    id: str
    owner: User | None
    status: str
    status_reason: str
    score: float | None
    question_id: str
    skill: str
    entrypoint: str
    config_file: str
    files: list[StoredFile]
    logs: str
    error: str
    attempts: list[GradingAttempt]


def local_name(name: str) -> str:
    """A name from the server as a local file name: its last path component, which must pass
    the upload name rule (else UnsafeFileName). `../x.py` → `x.py`; `..` is refused."""
    # submit.py imports the client, which imports this module: import the rule when used.
    from yoyaku_client.submit import name_problem

    base = re.split(r"[/\\]", name)[-1]
    problem = name_problem(base)
    if problem is not None:
        raise UnsafeFileName(f"The server named the file {name!r}: {problem}; not saved.")
    return base


_FILENAME_STAR = re.compile(r"filename\*=UTF-8''([^;\s]+)", re.IGNORECASE)
_FILENAME = re.compile(r'filename="((?:[^"\\]|\\.)*)"', re.IGNORECASE)


def disposition_name(header: str) -> str:
    """The file name a `Content-Disposition` header gives (`filename*` first)."""
    star = _FILENAME_STAR.search(header)
    if star is not None:
        return unquote(star.group(1), errors="strict")
    plain = _FILENAME.search(header)
    return "" if plain is None else re.sub(r"\\(.)", r"\1", plain.group(1))


def download(transport: Transport, path: str, dest: Path | str, *, name: str | None = None) -> Path:
    """Stream `GET /api<path>` into the folder `dest` under `local_name` of `name` (or of the
    name the server gives). The bytes go to a temporary file in `dest` and are checked
    against the sha256 in the `ETag`; only then does the file take its name (replacing a file
    of that name). Returns the path written."""
    folder = Path(dest)
    folder.mkdir(parents=True, exist_ok=True)
    request = transport.http.build_request("GET", quote(path, safe="/"))
    response = transport.http.send(request, stream=True)
    try:
        if response.status_code >= 300:
            response.read()
            raise Transport._error(response, "GET", path)
        target = folder / local_name(
            name or disposition_name(response.headers.get("Content-Disposition", ""))
        )
        digest = hashlib.sha256()
        import tempfile  # here: tempfile (shutil, bz2, lzma) is not on every command's start

        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".yoyaku-", suffix=".part")
        try:
            with os.fdopen(handle, "wb") as out:
                for chunk in response.iter_bytes(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
            expected = response.headers.get("ETag", "").strip('"').lower()
            if expected and expected != digest.hexdigest():
                raise YoyakuError(f"GET /api{path}: the bytes received do not match their sha256.")
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    finally:
        response.close()
    return target
