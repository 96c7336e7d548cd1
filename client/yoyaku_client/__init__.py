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

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Each name's module, imported on its first use: `yoyaku --help` and the commands that send
# nothing never load the SDK (`from yoyaku_client import Client` reads as it always did).
_HOMES = {
    "Action": "client",
    "Client": "client",
    "WaitTimeout": "client",
    "ResumableStatus": "endpoints.uploads",
    "UploadLimits": "endpoints.uploads",
    "RetryEvent": "transport",
    "RetryPolicy": "transport",
    "Safety": "transport",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name) or ("errors" if name in __all__ else None)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
