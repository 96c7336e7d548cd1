"""Requests without a file to a plain-HTTP server go out on a socket of their own, as httpx
would have sent them: the same request line and query, the token, the JSON body and its
length; a header that would end the head early is refused before anything is sent; the
answer (status, headers, JSON) reads as httpx's; the httpx client is made only when needed."""

from __future__ import annotations

import json
import socket
import threading

import httpx
import pytest

from tests.client.test_direct_upload import _Server
from yoyaku_client.direct import send_request
from yoyaku_client.errors import ApiError, TransportError
from yoyaku_client.transport import RetryPolicy, Safety, Transport


def _read_request(conn: socket.socket) -> tuple[list[str], bytes]:
    """The head's lines and the body (by its Content-Length) of one request."""
    data = bytearray()
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(
        (int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length")),
        0,
    )
    while len(body) < length:
        body += conn.recv(65536)
    return lines, body


def _answer(conn: socket.socket, status: str, document: object, *extra: str) -> None:
    body = json.dumps(document).encode()
    head = [f"HTTP/1.1 {status}", "Content-Type: application/json", *extra]
    head.append(f"Content-Length: {len(body)}")
    conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)


def test_a_json_post_goes_out_as_httpx_would_send_it_and_its_answer_reads_back() -> None:
    seen: dict[str, object] = {}

    def serve(conn: socket.socket) -> None:
        seen["lines"], seen["body"] = _read_request(conn)
        _answer(conn, "201 Created", {"job_id": "j1", "note": "ü"}, "Retry-After: 3")

    with _Server(serve) as url:
        transport = Transport(url, token="tok")
        response = transport.request(
            "POST", "/jobs/", params={"dry": "1", "none": None}, json={"submission_id": "s ü"}
        )
        transport.close()
    lines = seen["lines"]
    assert isinstance(lines, list)
    assert lines[0] == "POST /api/jobs/?dry=1 HTTP/1.1"
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    assert headers["authorization"] == "Bearer tok"
    assert headers["connection"] == "close"
    assert headers["accept-encoding"] == "identity"
    assert headers["content-type"] == "application/json"
    assert json.loads(seen["body"]) == {"submission_id": "s ü"}  # type: ignore[arg-type]
    assert int(headers["content-length"]) == len(seen["body"])  # type: ignore[arg-type]
    assert response.status_code == 201
    assert response.json() == {"job_id": "j1", "note": "ü"}
    assert response.headers["Retry-After"] == "3"
    assert transport._http is None  # no httpx client was made


def test_an_error_answer_is_the_apis_error_with_its_code() -> None:
    def serve(conn: socket.socket) -> None:
        _read_request(conn)
        _answer(conn, "404 Not Found", {"success": False, "code": "not_found", "error": "No."})

    with _Server(serve) as url:
        transport = Transport(url, token="tok")
        with pytest.raises(ApiError) as raised:
            transport.request("GET", "/jobs/abc/")
        transport.close()
    assert (raised.value.code, raised.value.status) == ("not_found", 404)


@pytest.mark.parametrize("token", ["tok\r\nX-Evil: 1", "tok\nX-Evil: 1", "tok\x00"])
def test_a_header_that_would_end_the_head_early_is_refused_before_connecting(token: str) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    request = httpx.Request("GET", f"{url}/api/me/", headers={"Authorization": token})
    with pytest.raises(httpx.LocalProtocolError):
        send_request(request, None, httpx.Timeout(5.0))
    transport = Transport(url, token=token, retry=RetryPolicy.none())
    with pytest.raises(TransportError):
        transport.request("GET", "/me/", safety=Safety.SAFE)
    with pytest.raises(TimeoutError):  # nobody connected: nothing was sent
        listener.accept()
    listener.close()


def test_the_httpx_client_is_made_on_first_use_once_even_from_threads() -> None:
    transport = Transport("http://127.0.0.1:9")
    assert transport._http is None
    made: list[httpx.Client] = []
    threads = [threading.Thread(target=lambda: made.append(transport.http)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(client) for client in made}) == 1
    transport.close()
    with pytest.raises(RuntimeError, match="closed"):
        transport.request("GET", "/me/")
    with pytest.raises(RuntimeError, match="closed"):
        transport.http  # noqa: B018 - the property raises


def test_a_transport_given_by_the_caller_takes_every_request() -> None:
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return httpx.Response(200, json={"username": "r"})

    transport = Transport("http://127.0.0.1:9", http_transport=httpx.MockTransport(handler))
    assert transport.request("GET", "/me/").json() == {"username": "r"}
    transport.close()
    assert asked == ["http://127.0.0.1:9/api/me/"]
