"""`Client`: one typed method per API operation.

Every method sends through `Transport.request`, the one place that retries; each call names
how safe it is to repeat (`Safety`). Methods return dataclasses (`yoyaku_client.models`) and
raise `ApiError` subclasses (`yoyaku_client.errors`) with the server's `code`, `error`,
`fields` and `retry_after`. The operations live by group in `yoyaku_client.endpoints`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from yoyaku_client.endpoints.account import AccountApi
from yoyaku_client.endpoints.challenges import ChallengesApi
from yoyaku_client.endpoints.jobs import JobsApi, WaitTimeout
from yoyaku_client.endpoints.quotas import QuotasApi
from yoyaku_client.endpoints.review import ReviewApi
from yoyaku_client.endpoints.schedules import Action, SchedulesApi, schedule_time
from yoyaku_client.endpoints.submissions import UPLOAD_KEY_FIELD, SubmissionsApi
from yoyaku_client.endpoints.uploads import UploadsApi
from yoyaku_client.transport import RetryEvent, RetryPolicy, Transport

if TYPE_CHECKING:
    import httpx

__all__ = ["UPLOAD_KEY_FIELD", "Action", "Client", "WaitTimeout", "schedule_time"]


class Client(
    AccountApi,
    SubmissionsApi,
    JobsApi,
    QuotasApi,
    ReviewApi,
    SchedulesApi,
    ChallengesApi,
    UploadsApi,
):
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
