"""Writes to jobs, one module per concern:

- `submission` — `job_submit`: the SPEC's order of checks, one transaction per new job;
- `idempotency` — the key protocol (resolve, claim, bind, release; `idempotent_transaction`
  ties claim, bind and release into one context manager) and the cleanup of keys;
- `lifecycle` — the only writers of a job's status (`job_transition`, `job_finish`), running
  logs (`job_logs_sink`, the seam a grader writes them through) and `job_cancel`.

The quota decision and the job's insert are `apps.jobs.admission`. The names below are the
app's public services, for other apps and the API.
"""

from apps.jobs.services.idempotency import (
    IdempotencyClaim,
    IdempotentWork,
    idempotency_bind,
    idempotency_claim,
    idempotency_fingerprint,
    idempotency_key_resolve,
    idempotency_keys_purge,
    idempotency_release,
    idempotency_retry_after,
    idempotent_transaction,
)
from apps.jobs.services.lifecycle import (
    job_cancel,
    job_finish,
    job_logs_progress,
    job_logs_sink,
    job_transition,
)
from apps.jobs.services.submission import SubmitResult, job_config_cost, job_submit

__all__ = [
    "IdempotencyClaim",
    "IdempotentWork",
    "SubmitResult",
    "idempotency_bind",
    "idempotency_claim",
    "idempotency_fingerprint",
    "idempotency_key_resolve",
    "idempotency_keys_purge",
    "idempotency_release",
    "idempotency_retry_after",
    "idempotent_transaction",
    "job_cancel",
    "job_config_cost",
    "job_finish",
    "job_logs_progress",
    "job_logs_sink",
    "job_submit",
    "job_transition",
]
