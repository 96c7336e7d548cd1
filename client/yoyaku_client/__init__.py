"""Yoyaku's Python SDK and `yoyaku` command line client.

```python
from yoyaku_client import Client

with Client("http://127.0.0.1:8000", token="...") as client:
    submission = client.create_submission(["main.py"])
    client.upload_file(submission.submission_id, "config.yaml")
    job = client.submit_job(submission.submission_id)
    final = client.wait_for_job(job.job_id, timeout=600)
```
"""

from yoyaku_client.client import Action, Client, WaitTimeout
from yoyaku_client.endpoints.uploads import ResumableStatus, UploadLimits
from yoyaku_client.errors import (
    AmbiguousRequestError,
    ApiError,
    AuthenticationError,
    ConflictError,
    IdempotencyInProgress,
    IdempotencyKeyReused,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    QuotaError,
    ServerError,
    TransportError,
    YoyakuError,
)
from yoyaku_client.transport import RetryEvent, RetryPolicy, Safety

__version__ = "0.1.0"

__all__ = [
    "Action",
    "AmbiguousRequestError",
    "ApiError",
    "AuthenticationError",
    "Client",
    "ConflictError",
    "IdempotencyInProgress",
    "IdempotencyKeyReused",
    "InvalidRequest",
    "NotFound",
    "PermissionDenied",
    "QuotaError",
    "ResumableStatus",
    "RetryEvent",
    "RetryPolicy",
    "Safety",
    "ServerError",
    "TransportError",
    "UploadLimits",
    "WaitTimeout",
    "YoyakuError",
    "__version__",
]
