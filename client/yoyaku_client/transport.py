"""The one place where requests are sent and retried.

Every request of the SDK goes through `Transport.request`, which decides, from the request's
`Safety` and what happened, whether to send it again:

- a transport failure (refused or reset connection, a connection closed before the answer,
  a timeout) and a 5xx answer are retried with exponential backoff and full jitter;
- a 4xx answer never is, except 409 `idempotency_request_in_progress` (another request with
  the same idempotency key is running), which is retried with the same key after the server's
  `Retry-After`, for up to `RetryPolicy.in_progress_timeout` seconds;
- a request that is not safe to repeat (`Safety.UNSAFE`) is retried only when it certainly
  did not reach the application: the connection could not be opened, or the answer was 503;
  a lost answer raises `AmbiguousRequestError`;
- a request that created something the client can find again (`Safety.RECOVERABLE`) calls
  its `recover` function before each new attempt and stops there if the thing exists.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote

from yoyaku_client import _httpx
from yoyaku_client.direct import direct_possible, send_request
from yoyaku_client.errors import (
    AmbiguousRequestError,
    ApiError,
    TransportError,
    error_from_body,
)
from yoyaku_client.multipart import MultipartStream
from yoyaku_client.record import Record
from yoyaku_client.wire import Request, Response, Timeout, api_url

if TYPE_CHECKING:
    import httpx

__all__ = ["ATTEMPTS_EXTENSION", "Body", "RetryEvent", "RetryPolicy", "Safety", "Transport"]

#: `response.extensions[ATTEMPTS_EXTENSION]`: how many times the request was sent.
ATTEMPTS_EXTENSION = "yoyaku.attempts"


class Safety(enum.Enum):
    """How a request may be repeated after its answer was lost."""

    #: Reads, and writes whose repetition is harmless: a POST with an idempotency key, a file
    #: upload (the same name and content answers 200), cancel, release, claim...
    SAFE = "safe"
    #: Creates something with no key: repeated only when it surely did not reach the server.
    UNSAFE = "unsafe"
    #: Creates something the client can look up (`recover`) before sending it again.
    RECOVERABLE = "recoverable"


@dataclass(frozen=True, eq=False, repr=False)
class RetryPolicy(Record):
    """Backoff: attempt n waits `min(max_delay, base_delay * 2**(n-1))`, scaled by a random
    factor in [1 - jitter, 1] (full jitter when jitter is 1), or the server's `Retry-After`
    when it is longer (capped by `max_delay`)."""

    max_attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 8.0
    jitter: float = 1.0
    retry_statuses: frozenset[int] = frozenset({500, 502, 503, 504})
    #: How long 409 `idempotency_request_in_progress` is retried (the server takes over a dead
    #: request's key after IDEMPOTENCY_LOCK_TIMEOUT, 60 s by default).
    in_progress_timeout: float = 90.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        base = min(self.max_delay, self.base_delay * (2.0 ** max(0, attempt - 1)))
        jitter = min(1.0, max(0.0, self.jitter))
        import random  # here: a retry is rare, `random` is not on every command's start

        wait = base * (1.0 - jitter * random.random())  # noqa: S311 - jitter, not a secret
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_delay))
        return wait

    @classmethod
    def none(cls) -> RetryPolicy:
        """Send once, never again."""
        return cls(max_attempts=1, in_progress_timeout=0.0)


@dataclass(frozen=True, eq=False, repr=False)
class RetryEvent(Record):
    """What `on_retry` is told before the transport waits and sends again."""

    method: str
    path: str
    attempt: int
    max_attempts: int
    delay: float
    reason: str


#: Builds a fresh request body for each attempt: (extra headers, byte chunks). A chunk may be
#: a view of a buffer the body reuses: it is copied before the next chunk is asked for.
Body = Callable[[], tuple[dict[str, str], Iterable[bytes | memoryview]]]

#: Looks up what an earlier attempt may have created; None when it did not.
Recover = Callable[[], Any]

#: The transport errors of a request that certainly never reached the server.
_NOT_SENT = ("ConnectError", "ConnectTimeout", "PoolTimeout", "UnsupportedProtocol")


class _Recovered(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class Transport:
    """An `httpx.Client` on `<base_url>/api` with the token, and the retry loop."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        retry: RetryPolicy | None = None,
        timeout: float | httpx.Timeout | None = None,
        on_retry: Callable[[RetryEvent], None] | None = None,
        http_transport: httpx.BaseTransport | None = None,
        user_agent: str = "yoyaku-client",
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self.on_retry = on_retry
        self._sleep = sleep
        headers = {"User-Agent": user_agent, "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.timeout = Timeout.of(timeout)
        self._headers = headers
        self._http_transport = http_transport
        self._http: httpx.Client | None = None
        self._http_lock = threading.Lock()
        self._closed = False
        # `<base_url>/api/`, to which a request's path is appended (as httpx's base_url does).
        self._api = api_url(self.base_url)
        # A plain-HTTP server's requests go out on a socket of their own, a file's bytes by
        # sendfile (`yoyaku_client.direct`), built without httpx (`yoyaku_client.wire`); with
        # a transport given (tests, a caller's own stack), over TLS, through a proxy or to a
        # base URL that needs escaping, every request goes through httpx.
        self._direct = (
            http_transport is None and self._api is not None and direct_possible(self.base_url)
        )

    @property
    def http(self) -> httpx.Client:
        """The `httpx.Client` on `<base_url>/api`, made on first use: a command that only
        talks to a plain-HTTP server never makes it (nor imports httpcore, a tenth of its
        start)."""
        with self._http_lock:
            if self._closed:
                raise RuntimeError("Cannot send a request, as the client has been closed.")
            if self._http is None:
                httpx = _httpx.load()
                self._http = httpx.Client(
                    base_url=f"{self.base_url}/api",
                    headers=self._headers,
                    timeout=httpx.Timeout(**self.timeout._asdict()),
                    transport=self._http_transport,
                    follow_redirects=False,
                    # Every request goes to base_url (redirects are not followed): a
                    # plain-HTTP server never needs the CA bundle, whose loading costs ~50 ms.
                    verify=not self.base_url.startswith("http://"),
                )
            return self._http

    def close(self) -> None:
        with self._http_lock:
            self._closed = True
            if self._http is not None:
                self._http.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        body: Body | None = None,
        headers: Mapping[str, str] | None = None,
        safety: Safety = Safety.SAFE,
        recover: Recover | None = None,
        auth: bool = True,
        retry: RetryPolicy | None = None,
    ) -> httpx.Response | Any:
        """Send until a 2xx answer (returned), an error that is not retried (raised as
        `ApiError`), or the end of the policy (`TransportError` / the last `ApiError`).

        With `recover`, returns whatever `recover()` found instead of a response, when it
        finds something before an attempt is repeated. `retry`: this request's policy
        instead of the transport's.
        """
        policy = retry or self.retry
        attempt = 0
        started = time.monotonic()
        query = {k: v for k, v in (params or {}).items() if v is not None}
        while True:
            attempt += 1
            try:
                response = self._send_once(method, path, query, json, body, headers, auth)
            except _httpx.load().TransportError as exc:  # httpx imported only on a failure
                httpx = _httpx.load()
                sent = not isinstance(exc, tuple(getattr(httpx, name) for name in _NOT_SENT))
                reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                if safety is Safety.UNSAFE and sent:
                    raise AmbiguousRequestError(
                        f"{method} /api{path}: the answer was lost ({reason}); the request may "
                        "have taken effect, so it was not sent again",
                        method=method,
                        path=path,
                        attempts=attempt,
                        sent=True,
                    ) from exc
                if attempt >= policy.max_attempts:
                    raise TransportError(
                        f"{method} /api{path}: no answer after {attempt} attempt(s): {reason}",
                        method=method,
                        path=path,
                        attempts=attempt,
                        sent=sent,
                    ) from exc
                self._wait(method, path, attempt, policy.delay(attempt), reason)
                if sent and recover is not None:
                    found = recover()
                    if found is not None:
                        return found
                continue

            if response.status_code < 300:
                response.extensions[ATTEMPTS_EXTENSION] = attempt
                return response
            error = self._error(response, method, path)
            if error.code == "idempotency_request_in_progress" and safety is Safety.SAFE:
                elapsed = time.monotonic() - started
                if elapsed < policy.in_progress_timeout:
                    wait = error.retry_after if error.retry_after is not None else 1.0
                    wait = min(wait, max(0.0, policy.in_progress_timeout - elapsed), 10.0)
                    self._wait(method, path, attempt, wait, f"409 {error.code}")
                    continue
                raise error
            retryable = response.status_code in policy.retry_statuses
            if safety is Safety.UNSAFE:
                retryable = response.status_code == 503
            if not retryable or attempt >= policy.max_attempts:
                raise error
            self._wait(
                method,
                path,
                attempt,
                policy.delay(attempt, error.retry_after),
                f"{response.status_code} {error.code}",
            )
            if recover is not None:
                found = recover()
                if found is not None:
                    return found

    def _send_once(
        self,
        method: str,
        path: str,
        params: Mapping[str, Any],
        json: Any,
        body: Body | None,
        headers: Mapping[str, str] | None,
        auth: bool,
    ) -> Any:  # an `httpx.Response`, or a `wire.Response` that reads as one
        request_headers = dict(headers or {})
        chunks: Iterable[bytes | memoryview] | None = None
        if body is not None:
            extra, chunks = body()
            request_headers.update(extra)
        # An id typed by a user is sent as data, never as URL syntax or raw control bytes.
        target = quote(path, safe="/")
        direct = self._direct and (chunks is None or isinstance(chunks, MultipartStream))
        try:
            if direct:
                if self._closed:
                    raise RuntimeError("Cannot send a request, as the client has been closed.")
                assert self._api is not None  # noqa: S101 - `_direct` says so
                direct_request = Request(
                    method,
                    self._api,
                    target,
                    params=params or None,
                    json=json,
                    headers={**self._headers, **request_headers},
                )
                if not auth:
                    direct_request.headers.pop("Authorization", None)
                stream = cast("MultipartStream | None", chunks)
                return send_request(direct_request, stream, self.timeout)
            request = self.http.build_request(
                method,
                target,
                params=params or None,
                json=json,
                content=_chunks(chunks) if chunks is not None else None,
                headers=request_headers,
            )
            if not auth:
                request.headers.pop("Authorization", None)
            response = self.http.send(request)
            response.read()
        finally:
            close = getattr(chunks, "close", None)
            if callable(close):
                close()
        return response

    def wait_before_retry(
        self, method: str, path: str, attempt: int, delay: float, reason: str
    ) -> None:
        """Tell `on_retry` and wait `delay`: for a caller's own retry loop (resumable uploads
        carry on from the server's offset, not by sending the same request again)."""
        self._wait(method, path, attempt, delay, reason)

    def _wait(self, method: str, path: str, attempt: int, delay: float, reason: str) -> None:
        if self.on_retry is not None:
            self.on_retry(
                RetryEvent(
                    method=method,
                    path=path,
                    attempt=attempt + 1,
                    max_attempts=self.retry.max_attempts,
                    delay=delay,
                    reason=reason,
                )
            )
        if delay > 0:
            self._sleep(delay)

    @staticmethod
    def _error(response: httpx.Response | Response, method: str, path: str) -> ApiError:
        try:
            data = response.json()
        except ValueError:
            data = None
        return error_from_body(
            response.status_code,
            data,
            retry_after_header=response.headers.get("Retry-After"),
            method=method,
            path=path,
            text=_text(response) if data is None else "",
        )


def _text(response: httpx.Response | Response) -> str:
    """The body as text; a charset whose codec refuses to replace what it cannot decode
    (`idna`, `undefined`, `punycode`: httpx raises for them) reads as UTF-8."""
    try:
        return response.text
    except UnicodeError:
        return response.content.decode("utf-8", errors="replace")


def _chunks(chunks: Iterable[bytes | memoryview]) -> Iterator[bytes]:
    # httpx types request content as bytes. h11 hands a lone `bytes` chunk to the socket as
    # it is and copies any other buffer first (b"".join), so a view of a buffer that the body
    # reuses is safe, but costs a copy that a `bytes` chunk does not.
    for chunk in chunks:
        yield cast(bytes, chunk)
