"""`Client`: one typed method per API operation.

Every method sends through `Transport.request`, the one place that retries; each call names
how safe it is to repeat (`Safety`). Methods return dataclasses (`yoyaku_client.models`) and
raise `ApiError` subclasses (`yoyaku_client.errors`) with the server's `code`, `error`,
`fields` and `retry_after`.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from yoyaku_client.errors import YoyakuError
from yoyaku_client.files import ReviewDetail, download
from yoyaku_client.models import (
    ApiToken,
    Claim,
    ClaimRelease,
    FileInfo,
    Job,
    JobLogs,
    JobSubmission,
    LeaderboardQuestion,
    LeaderboardRow,
    Life,
    Me,
    Quota,
    Regrade,
    Reservation,
    ReviewOutcome,
    ReviewQueueEntry,
    Submission,
    SubmissionPage,
    TaskRun,
    UploadedFile,
)
from yoyaku_client.multipart import FilePart, ProgressCallback, multipart_body
from yoyaku_client.transport import (
    ATTEMPTS_EXTENSION,
    RetryEvent,
    RetryPolicy,
    Safety,
    Transport,
)

__all__ = ["UPLOAD_KEY_FIELD", "Action", "Client", "WaitTimeout"]

#: The metadata entry that ties a submission to the client's upload (its idempotency key), so
#: that a lost answer, a killed process or a CI re-run finds the same draft again.
UPLOAD_KEY_FIELD = "yoyaku_upload_key"


class WaitTimeout(YoyakuError):
    """`wait_for_job` ran out of time; `job` is the last state seen."""

    def __init__(self, job: Job, timeout: float) -> None:
        super().__init__(f"job {job.job_id} still {job.status} after {timeout:g} s")
        self.job = job
        self.timeout = timeout


@dataclass(frozen=True)
class Action:
    """What a schedule plan does at its time: a request to a path on the platform (runs as
    you) or to an allowed absolute URL."""

    path: str
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    connect_timeout: float | None = None
    request_timeout: float | None = None
    retry_count: int | None = None
    retry_interval: float | None = None

    def to_api(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path, "method": self.method.upper()}
        if self.headers:
            data["headers"] = dict(self.headers)
        if self.body is not None:
            data["body"] = self.body
        for name in ("connect_timeout", "request_timeout", "retry_count", "retry_interval"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        return data


def schedule_time(value: dt.datetime | str) -> str:
    """A datetime → ISO 8601 (an aware one keeps its offset); a string is sent as written
    (`YYYY-MM-DD HH:MM:SS` in the server's SCHEDULE_TIMEZONE, or ISO 8601)."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return value.strftime("%Y-%m-%d %H:%M:%S")
        return value.isoformat()
    return value


def _file_part(path: Path | str, filename: str | None, field_name: str) -> FilePart:
    source = Path(path)
    return FilePart(path=source, filename=filename or source.name, field=field_name)


class Client:
    """A Yoyaku API client.

    `base_url` is the server's root (`http://127.0.0.1:8000`, without `/api`). `retry`
    configures the one retry loop (`RetryPolicy`); `on_retry` is told of every retry.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        retry: RetryPolicy | None = None,
        timeout: float | httpx.Timeout | None = None,
        on_retry: Callable[[RetryEvent], None] | None = None,
        http_transport: httpx.BaseTransport | None = None,
        user_agent: str | None = None,
    ) -> None:
        from yoyaku_client import __version__

        self.transport = Transport(
            base_url,
            token,
            retry=retry,
            timeout=timeout,
            on_retry=on_retry,
            http_transport=http_transport,
            user_agent=user_agent or f"yoyaku-client/{__version__}",
        )

    @property
    def base_url(self) -> str:
        return self.transport.base_url

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing -------------------------------------------------------------------------

    def _json(
        self,
        method: str,
        path: str,
        *,
        safety: Safety = Safety.SAFE,
        auth: bool = True,
        **kwargs: Any,
    ) -> Any:
        response = self.transport.request(method, path, safety=safety, auth=auth, **kwargs)
        return response.json()

    # --- account --------------------------------------------------------------------------

    def me(self) -> Me:
        """`GET /api/me/`: who the token belongs to."""
        return Me.from_api(self._json("GET", "/me/"))

    # --- API tokens -----------------------------------------------------------------------

    def list_tokens(self) -> list[ApiToken]:
        """`GET /api/tokens/`: your tokens, without their secrets."""
        return [ApiToken.from_api(t) for t in self._json("GET", "/tokens/")]

    def create_token(
        self,
        name: str,
        *,
        scopes: Sequence[str] | None = None,
        expires_at: dt.datetime | str | None = None,
        username: str | None = None,
        password: str | None = None,
    ) -> ApiToken:
        """`POST /api/tokens/`: a new token; its secret is in `.token`, shown this once.

        `scopes` default to the server's (`submit read`). With `username` and `password` the
        request is authenticated by the password (HTTP Basic) instead of this client's token
        (how `yoyaku login --username` gets a token). Not repeated after a lost answer
        (`AmbiguousRequestError`): the token the server made could not be shown again.
        """
        body: dict[str, Any] = {"name": name}
        if scopes is not None:
            body["scopes"] = list(scopes)
        if expires_at is not None:
            body["expires_at"] = (
                expires_at.isoformat() if isinstance(expires_at, dt.datetime) else expires_at
            )
        headers = {}
        if username is not None:
            raw = f"{username}:{password or ''}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(raw).decode("ascii")
        data = self._json("POST", "/tokens/", json=body, headers=headers, safety=Safety.UNSAFE)
        return ApiToken.from_api(data)

    def revoke_token(self, token_id: str) -> None:
        """`DELETE /api/tokens/{id}/`: the token stops working at once."""
        self.transport.request("DELETE", f"/tokens/{token_id}/")

    # --- submissions ----------------------------------------------------------------------

    def create_submission(
        self,
        files: Sequence[Path | str],
        *,
        entrypoint: str = "main.py",
        config_file: str = "config.yaml",
        metadata: Mapping[str, Any] | None = None,
        question_id: str = "",
        skill: str = "",
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
            ("entrypoint", entrypoint),
            ("config_file", config_file),
            ("metadata", json.dumps(meta, separators=(",", ":"), sort_keys=True)),
            ("question_id", question_id),
            ("skill", skill),
        ]
        headers = {"X-Content-SHA256": sha256} if sha256 and len(files) == 1 else None
        body = multipart_body(
            fields,
            [_file_part(f, None, "files") for f in files],
            progress=progress,
            extra_headers=headers,
        )
        started = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)

        def recover() -> Submission | None:
            found = self.find_submissions(upload_key=key, created_after=started)
            return found[0] if found else None

        answer = self.transport.request(
            "POST", "/submissions/", body=body, safety=Safety.RECOVERABLE, recover=recover
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
    ) -> UploadedFile:
        """`POST /api/submissions/{id}/files/`: one file, streamed.

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
            "POST", f"/submissions/{submission_id}/files/", body=body, safety=Safety.SAFE
        )
        info = FileInfo.from_api(response.json())
        return UploadedFile(
            filename=info.filename,
            size=info.size,
            sha256=info.sha256,
            uploaded_at=info.uploaded_at,
            created=response.status_code == 201,
        )

    # --- jobs -----------------------------------------------------------------------------

    def submit_job(
        self,
        submission_id: str,
        *,
        config: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        idempotency_ttl_hours: int | None = None,
        reservation_id: str | None = None,
    ) -> JobSubmission:
        """`POST /api/jobs/`: enqueue a job for a draft submission.

        One idempotency key (a new random one when not given) goes with every attempt, so a
        retry after a lost answer, a 5xx or a 409 `idempotency_request_in_progress` returns
        the same job, never a second one. Quota, rate and cost refusals raise `QuotaError`
        at once.
        """
        key = idempotency_key or f"sdk-{uuid.uuid4().hex}"
        payload: dict[str, Any] = {"submission_id": submission_id, "idempotency_key": key}
        if config is not None:
            payload["config"] = dict(config)
        if idempotency_ttl_hours is not None:
            payload["idempotency_ttl_hours"] = idempotency_ttl_hours
        if reservation_id:
            payload["reservation_id"] = reservation_id
        response = self.transport.request("POST", "/jobs/", json=payload, safety=Safety.SAFE)
        attempts = int(response.extensions.get(ATTEMPTS_EXTENSION, 1))
        return JobSubmission.from_api(response.json(), key=key, attempts=attempts)

    def list_jobs(self, *, status: str | None = None) -> list[Job]:
        """`GET /api/jobs/`: yours, newest first."""
        return [Job.from_api(j) for j in self._json("GET", "/jobs/", params={"status": status})]

    def get_job(self, job_id: str) -> Job:
        """`GET /api/jobs/{id}/`."""
        return Job.from_api(self._json("GET", f"/jobs/{job_id}/"))

    def cancel_job(self, job_id: str) -> Job:
        """`POST /api/jobs/{id}/cancel/`; cancelling a cancelled job again is fine."""
        return Job.from_api(self._json("POST", f"/jobs/{job_id}/cancel/"))

    def job_logs(self, job_id: str) -> JobLogs:
        """`GET /api/jobs/{id}/logs/`: the grader's captured output so far."""
        return JobLogs.from_api(self._json("GET", f"/jobs/{job_id}/logs/"))

    def wait_for_job(
        self,
        job_id: str,
        *,
        timeout: float | None = None,
        poll_interval: float = 1.0,
        max_interval: float = 5.0,
        on_change: Callable[[Job], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Job:
        """Poll until the job is completed, failed or cancelled; `WaitTimeout` after
        `timeout` seconds. `on_change` sees every new status."""
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = poll_interval
        last_status = None
        while True:
            job = self.get_job(job_id)
            if job.status != last_status:
                last_status = job.status
                interval = poll_interval
                if on_change is not None:
                    on_change(job)
            if job.finished:
                return job
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WaitTimeout(job, timeout or 0.0)
                sleep(min(interval, left))
            else:
                sleep(interval)
            interval = min(max_interval, interval * 1.5)

    # --- quotas and reservations ------------------------------------------------------------

    def quota(self) -> Quota:
        """`GET /api/quotas/me/`: limits and usage."""
        return Quota.from_api(self._json("GET", "/quotas/me/"))

    def list_reservations(self) -> list[Reservation]:
        """`GET /api/quotas/reservations/`: yours, with their state now."""
        return [Reservation.from_api(r) for r in self._json("GET", "/quotas/reservations/")]

    def reserve(self, *, ttl_seconds: int | None = None) -> Reservation:
        """`POST /api/quotas/reservations/`: hold a concurrent-job slot.

        Not repeated after a lost answer (`AmbiguousRequestError`): a second reservation
        would hold a second slot until it expires.
        """
        body = {} if ttl_seconds is None else {"ttl_seconds": ttl_seconds}
        data = self._json("POST", "/quotas/reservations/", json=body, safety=Safety.UNSAFE)
        return Reservation.from_api(data)

    def release_reservation(self, reservation_id: str) -> Reservation:
        """`POST .../release/`; releasing twice is fine."""
        path = f"/quotas/reservations/{reservation_id}/release/"
        return Reservation.from_api(self._json("POST", path, json={}))

    def extend_reservation(
        self, reservation_id: str, *, ttl_seconds: int | None = None
    ) -> Reservation:
        """`POST .../extend/`: expiry = now + ttl (only while active)."""
        body = {} if ttl_seconds is None else {"ttl_seconds": ttl_seconds}
        path = f"/quotas/reservations/{reservation_id}/extend/"
        return Reservation.from_api(self._json("POST", path, json=body))

    # --- review and leaderboard ---------------------------------------------------------------

    def leaderboard(
        self, *, question_id: str | None = None, skill: str | None = None, limit: int | None = None
    ) -> list[LeaderboardRow]:
        """`GET /api/leaderboard/`: best completed score per user (public by default)."""
        params = {"question_id": question_id, "skill": skill, "limit": limit}
        return [
            LeaderboardRow.from_api(r) for r in self._json("GET", "/leaderboard/", params=params)
        ]

    def leaderboard_questions(self, *, limit: int | None = None) -> list[LeaderboardQuestion]:
        """`GET /api/leaderboard/questions/`: the questions that have a leaderboard."""
        rows = self._json("GET", "/leaderboard/questions/", params={"limit": limit})
        return [LeaderboardQuestion.from_api(r) for r in rows]

    def review_queue(self, *, limit: int | None = None) -> list[ReviewQueueEntry]:
        """`GET /api/review/queue/` (reviewers)."""
        rows = self._json("GET", "/review/queue/", params={"limit": limit})
        return [ReviewQueueEntry.from_api(r) for r in rows]

    def review_submission(self, submission_id: str) -> ReviewDetail:
        """`GET /api/review/submissions/{id}/` (reviewers): files with archive members and
        download paths, the grader's output, every grading attempt."""
        data = self._json("GET", f"/review/submissions/{submission_id}/")
        return ReviewDetail.from_api(data)

    def download_file(
        self,
        submission_id: str,
        file_id: int,
        dest: Path | str = ".",
        *,
        review: bool = False,
        name: str | None = None,
    ) -> Path:
        """Stream one file of a submission into the folder `dest`, checked against its
        sha256, under a safe local name (never a path from the server; `UnsafeFileName` for a
        name that cannot be one). `review=True` goes through the review API (a token with
        `review`). Returns the path written."""
        prefix = "/review/submissions" if review else "/submissions"
        path = f"{prefix}/{submission_id}/files/{int(file_id)}/download/"
        return download(self.transport, path, dest, name=name)

    def claim_review(self, submission_id: str) -> Claim:
        """`POST .../claim/`: yours already → extended, so repeating it is harmless."""
        return Claim.from_api(self._json("POST", f"/review/submissions/{submission_id}/claim/"))

    def extend_review_claim(self, submission_id: str) -> Claim:
        return Claim.from_api(self._json("POST", f"/review/submissions/{submission_id}/extend/"))

    def release_review_claim(self, submission_id: str) -> ClaimRelease:
        path = f"/review/submissions/{submission_id}/release/"
        return ClaimRelease.from_api(self._json("POST", path, safety=Safety.UNSAFE))

    def complete_review(
        self,
        submission_id: str,
        *,
        verdict: str,
        score: float | None = None,
        comment: str = "",
    ) -> ReviewOutcome:
        """`POST .../complete/` with `approve` or `reject`. Not repeated after a lost answer
        (a second one would answer 409 `invalid_transition`)."""
        body: dict[str, Any] = {"verdict": verdict, "comment": comment}
        if score is not None:
            body["score"] = score
        path = f"/review/submissions/{submission_id}/complete/"
        return ReviewOutcome.from_api(self._json("POST", path, json=body, safety=Safety.UNSAFE))

    def regrade(self, submission_id: str) -> Regrade:
        """`POST .../regrade/` (staff): a new job for a finished submission."""
        path = f"/review/submissions/{submission_id}/regrade/"
        return Regrade.from_api(self._json("POST", path, safety=Safety.UNSAFE))

    # --- schedules ----------------------------------------------------------------------------

    def book_schedule(self, booking: Mapping[str, Any]) -> Life:
        """`POST /api/schedules/` with the API's own body. A `life_uuid` is generated when
        missing: re-posting the same booking with it answers 200 with the same Life, so the
        request is safe to repeat."""
        body = dict(booking)
        body.setdefault("life_uuid", uuid.uuid4().hex)
        return Life.from_api(self._json("POST", "/schedules/", json=body))

    def book_point(
        self,
        *,
        at: dt.datetime | str,
        action: Action,
        resource_id: str = "",
        life_uuid: str | None = None,
    ) -> Life:
        """A point Life: `action` runs once at `at`."""
        body: dict[str, Any] = {
            "schedule_type": "point",
            "term": {"birth_time": schedule_time(at)},
            "birth": action.to_api(),
        }
        if resource_id:
            body["resource_id"] = resource_id
        if life_uuid:
            body["life_uuid"] = life_uuid
        return self.book_schedule(body)

    def book_term(
        self,
        *,
        birth_time: dt.datetime | str,
        death_time: dt.datetime | str,
        birth: Action,
        death: Action,
        resource_id: str = "",
        life_uuid: str | None = None,
    ) -> Life:
        """A term Life: `birth` runs at `birth_time`, `death` at `death_time`."""
        body: dict[str, Any] = {
            "schedule_type": "term",
            "term": {
                "birth_time": schedule_time(birth_time),
                "death_time": schedule_time(death_time),
            },
            "birth": birth.to_api(),
            "death": death.to_api(),
        }
        if resource_id:
            body["resource_id"] = resource_id
        if life_uuid:
            body["life_uuid"] = life_uuid
        return self.book_schedule(body)

    def list_schedules(
        self,
        *,
        state: str | None = None,
        resource_id: str | None = None,
        schedule_type: str | None = None,
    ) -> list[Life]:
        """`GET /api/schedules/`: your Lives."""
        params = {"state": state, "resource_id": resource_id, "schedule_type": schedule_type}
        return [Life.from_api(x) for x in self._json("GET", "/schedules/", params=params)]

    def get_schedule(self, life_uuid: str) -> Life:
        """`GET /api/schedules/{life_uuid}/`, with plans and every attempt."""
        return Life.from_api(self._json("GET", f"/schedules/{life_uuid}/"))

    def change_schedule(
        self,
        life_uuid: str,
        *,
        birth_time: dt.datetime | str | None = None,
        death_time: dt.datetime | str | None = None,
        changes: Mapping[str, Any] | None = None,
    ) -> Life:
        """`PATCH /api/schedules/{life_uuid}/`: new times (plans not yet started)."""
        body: dict[str, Any] = dict(changes or {})
        if birth_time is not None:
            body["birth_time"] = schedule_time(birth_time)
        if death_time is not None:
            body["death_time"] = schedule_time(death_time)
        return Life.from_api(self._json("PATCH", f"/schedules/{life_uuid}/", json=body))

    def cancel_schedule(self, life_uuid: str) -> Life:
        """`DELETE /api/schedules/{life_uuid}/`: before birth → Stillbirth; during a term the
        death action runs now."""
        return Life.from_api(self._json("DELETE", f"/schedules/{life_uuid}/"))

    def create_task(self, topic: str, content: Mapping[str, Any] | None = None) -> TaskRun:
        """`POST /api/schedule/tasks/`: run a task topic once on a worker. Not repeated after
        a lost answer (only a plan's call carries a key the server deduplicates on)."""
        body = {"topic": topic, "content": dict(content or {})}
        return TaskRun.from_api(
            self._json("POST", "/schedule/tasks/", json=body, safety=Safety.UNSAFE)
        )
