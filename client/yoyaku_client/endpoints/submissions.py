"""`/api/submissions/`: drafts, their files, and finding a draft again by its upload key."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from yoyaku_client.endpoints.base import ApiBase
from yoyaku_client.models import FileInfo, Submission, SubmissionPage, UploadedFile
from yoyaku_client.multipart import FilePart, ProgressCallback, multipart_body
from yoyaku_client.transport import Body, RetryPolicy, Safety

#: The metadata entry that ties a submission to the client's upload (its idempotency key), so
#: that a lost answer, a killed process or a CI re-run finds the same draft again.
UPLOAD_KEY_FIELD = "yoyaku_upload_key"


def _file_part(path: Path | str, filename: str | None, field_name: str) -> FilePart:
    source = Path(path)
    return FilePart(path=source, filename=filename or source.name, field=field_name)


def _draft_fields(
    entrypoint: str, config_file: str, question_id: str, skill: str, challenge: str, phase: str
) -> list[tuple[str, str]]:
    """A new draft's settings: a phase's submission names its challenge and phase (and no
    question or skill)."""
    fields = [("entrypoint", entrypoint), ("config_file", config_file)]
    if challenge or phase:
        return [*fields, ("challenge", challenge), ("phase", phase)]
    return [*fields, ("question_id", question_id), ("skill", skill)]


class SubmissionsApi(ApiBase):
    """Drafts and their files."""

    def create_submission(
        self,
        files: Sequence[Path | str],
        *,
        entrypoint: str = "main.py",
        config_file: str = "config.yaml",
        metadata: Mapping[str, Any] | None = None,
        question_id: str = "",
        skill: str = "",
        challenge: str = "",
        phase: str = "",
        sha256: str | None = None,
        upload_key: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> Submission:
        """`POST /api/submissions/`: a draft with its first file (or several at once).

        The draft's metadata carries `upload_key` (a new random one when not given), so a
        retry after a lost answer first looks for the draft that attempt may have created
        (`find_submissions`) instead of creating a second one. `sha256` (one file only) goes
        as `X-Content-SHA256`.
        """
        if not files:
            raise ValueError("a submission starts with at least one file")
        key = upload_key or f"sdk-{uuid.uuid4().hex}"
        meta = {**dict(metadata or {}), UPLOAD_KEY_FIELD: key}
        fields = [
            *_draft_fields(entrypoint, config_file, question_id, skill, challenge, phase),
            ("metadata", json.dumps(meta, separators=(",", ":"), sort_keys=True)),
        ]
        headers = {"X-Content-SHA256": sha256} if sha256 and len(files) == 1 else None
        body = multipart_body(
            fields,
            [_file_part(f, None, "files") for f in files],
            progress=progress,
            extra_headers=headers,
        )
        return self._create_draft(key, body=body)

    def create_submission_from_upload(
        self,
        upload_id: str,
        filename: str,
        *,
        entrypoint: str = "main.py",
        config_file: str = "config.yaml",
        metadata: Mapping[str, Any] | None = None,
        question_id: str = "",
        skill: str = "",
        challenge: str = "",
        phase: str = "",
        upload_key: str | None = None,
    ) -> Submission:
        """`POST /api/submissions/` `{"upload_id", "filename", ...}`: a draft whose first file
        is a finished resumable upload (for a submission whose every file is too large to
        be sent whole). Found again by `upload_key` after a lost answer, as
        `create_submission`."""
        key = upload_key or f"sdk-{uuid.uuid4().hex}"
        fields = _draft_fields(entrypoint, config_file, question_id, skill, challenge, phase)
        body: dict[str, Any] = {
            "upload_id": upload_id,
            "filename": filename,
            "metadata": {**dict(metadata or {}), UPLOAD_KEY_FIELD: key},
            # A blank entrypoint or config file (a predictions phase's) is not sent.
            **{k: v for k, v in fields if v or k not in ("entrypoint", "config_file")},
        }
        return self._create_draft(key, json=body)

    def _create_draft(self, key: str, *, body: Body | None = None, json: Any = None) -> Submission:
        """`POST /api/submissions/` (a multipart `body` or a `json` one), found again by its
        upload key when an attempt's answer was lost."""
        started = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)

        def recover() -> Submission | None:
            found = self.find_submissions(upload_key=key, created_after=started)
            return found[0] if found else None

        answer = self.transport.request(
            "POST",
            "/submissions/",
            body=body,
            json=json,
            safety=Safety.RECOVERABLE,
            recover=recover,
        )
        if isinstance(answer, Submission):
            return answer
        return Submission.from_api(answer.json())

    def list_submissions(self, *, limit: int = 20, offset: int = 0) -> SubmissionPage:
        """`GET /api/submissions/`: yours, newest first, with their files."""
        data = self._json("GET", "/submissions/", params={"limit": limit, "offset": offset})
        results = [Submission.from_api(s) for s in data.get("results") or []]
        next_offset = offset + len(results) if data.get("next") else None
        return SubmissionPage(
            count=int(data.get("count") or 0), next_offset=next_offset, results=results
        )

    def iter_submissions(self, *, page_size: int = 100) -> Iterator[Submission]:
        """Every submission of yours, newest first, fetched page by page."""
        offset: int | None = 0
        while offset is not None:
            page = self.list_submissions(limit=page_size, offset=offset)
            yield from page.results
            offset = page.next_offset

    def find_submissions(
        self,
        *,
        upload_key: str,
        created_after: dt.datetime | None = None,
        scan_limit: int = 500,
    ) -> list[Submission]:
        """Your submissions whose metadata carries `upload_key`, newest first; the scan stops
        at the first submission created before `created_after`, or after `scan_limit`."""
        found: list[Submission] = []
        for scanned, submission in enumerate(self.iter_submissions(page_size=50)):
            if scanned >= scan_limit:
                break
            if (
                created_after is not None
                and submission.created_at is not None
                and submission.created_at < created_after
            ):
                break
            if submission.metadata.get(UPLOAD_KEY_FIELD) == upload_key:
                found.append(submission)
        return found

    def get_submission(self, submission_id: str) -> Submission:
        """`GET /api/submissions/{id}/`."""
        return Submission.from_api(self._json("GET", f"/submissions/{submission_id}/"))

    def list_files(self, submission_id: str) -> list[FileInfo]:
        """`GET /api/submissions/{id}/files/`: in upload order."""
        data = self._json("GET", f"/submissions/{submission_id}/files/")
        return [FileInfo.from_api(f) for f in data.get("files") or []]

    def upload_file(
        self,
        submission_id: str,
        path: Path | str,
        *,
        filename: str | None = None,
        sha256: str | None = None,
        progress: ProgressCallback | None = None,
        retry: RetryPolicy | None = None,
    ) -> UploadedFile:
        """`POST /api/submissions/{id}/files/`: one file, streamed (`retry`: a policy of its
        own instead of the client's).

        Safe to repeat: the server answers 200 with the stored file when the same name and
        content are already there, so a retry after a lost answer never fails with
        `duplicate_filename`. `sha256` goes as `X-Content-SHA256` (the server refuses a
        mismatch with `checksum_mismatch` and keeps nothing).
        """
        headers = {"X-Content-SHA256": sha256} if sha256 else None
        body = multipart_body(
            [], [_file_part(path, filename, "file")], progress=progress, extra_headers=headers
        )
        response = self.transport.request(
            "POST",
            f"/submissions/{submission_id}/files/",
            body=body,
            safety=Safety.SAFE,
            retry=retry,
        )
        return UploadedFile.from_answer(response.json(), status_code=response.status_code)
