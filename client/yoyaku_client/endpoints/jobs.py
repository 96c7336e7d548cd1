"""`/api/jobs/`: enqueue, read, cancel, follow a job and read its output."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from yoyaku_client import models
from yoyaku_client.endpoints.base import ApiBase
from yoyaku_client.errors import YoyakuError
from yoyaku_client.models import Job, JobSubmission
from yoyaku_client.transport import ATTEMPTS_EXTENSION, Safety

if TYPE_CHECKING:
    from yoyaku_client.models import JobLogs


class WaitTimeout(YoyakuError):
    """`wait_for_job` ran out of time; `job` is the last state seen."""

    def __init__(self, job: Job, timeout: float) -> None:
        super().__init__(f"job {job.job_id} still {job.status} after {timeout:g} s")
        self.job = job
        self.timeout = timeout


class JobsApi(ApiBase):
    """Jobs: enqueue (idempotent), read, cancel, wait, logs."""

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
        return models.JobLogs.from_api(self._json("GET", f"/jobs/{job_id}/logs/"))

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
