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
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from yoyaku_client.errors import YoyakuError
from yoyaku_client.models import User, _float, _int, _str, parse_time
from yoyaku_client.transport import Transport

CHUNK = 256 * 1024


class UnsafeFileName(YoyakuError):
    """A name from the server that cannot be a local file name."""


@dataclass(frozen=True)
class ArchiveMember:
    name: str
    size: int
    type: str  # "file" or "folder"

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ArchiveMember:
        return cls(name=_str(data, "name"), size=_int(data, "size"), type=_str(data, "type"))


@dataclass(frozen=True)
class StoredFile:
    id: int
    filename: str
    size: int
    sha256: str
    download_url: str
    text: str | None = None
    members: list[ArchiveMember] | None = None
    members_problem: str = ""

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> StoredFile:
        members = data.get("members")
        return cls(
            id=_int(data, "id"),
            filename=_str(data, "filename"),
            size=_int(data, "size"),
            sha256=_str(data, "sha256").lower(),
            download_url=_str(data, "download_url"),
            text=data.get("text") if isinstance(data.get("text"), str) else None,
            members=None
            if not isinstance(members, list)
            else [ArchiveMember.from_api(m) for m in members if isinstance(m, Mapping)],
            members_problem=_str(data, "members_problem"),
        )


@dataclass(frozen=True)
class GradingAttempt:
    number: int
    outcome: str
    exit_code: int | None
    score: float | None
    reason: str
    started_at: dt.datetime | None

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> GradingAttempt:
        exit_code = data.get("exit_code")
        return cls(
            number=_int(data, "number"),
            outcome=_str(data, "outcome"),
            exit_code=exit_code if isinstance(exit_code, int) else None,
            score=_float(data, "score"),
            reason=_str(data, "reason"),
            started_at=parse_time(data.get("started_at")),
        )


@dataclass(frozen=True)
class ReviewDetail:
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

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ReviewDetail:
        return cls(
            id=_str(data, "id"),
            owner=User.maybe(data.get("owner")),
            status=_str(data, "status"),
            status_reason=_str(data, "status_reason"),
            score=_float(data, "score"),
            question_id=_str(data, "question_id"),
            skill=_str(data, "skill"),
            entrypoint=_str(data, "entrypoint"),
            config_file=_str(data, "config_file"),
            files=[StoredFile.from_api(f) for f in data.get("files") or []],
            logs=_str(data, "logs"),
            error=_str(data, "error"),
            attempts=[GradingAttempt.from_api(a) for a in data.get("attempts") or []],
        )


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
