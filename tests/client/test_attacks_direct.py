"""A hostile plain-HTTP server against the `yoyaku` console script, on loopback: endless
headers, a huge or endless body, a malformed status line, a redirect to another host, bytes
after the body, a drip past the timeout. Each ends in the documented error (exit 1, `--json`
code `no_answer` or the server's error) within a bound, in bounded memory, with one request
on the wire and no traceback. Hostile local input (CR/LF/NUL in the token, an id, a file
name, metadata) never reaches the head as a header or a second request."""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.client.conftest import HELLO_CONFIG, HELLO_MAIN, write_files, yoyaku_command
from tests.client.hostile import Handle, Hostile, endless

TIMEOUT = 1.0  # YOYAKU_TIMEOUT given to the client


def run(
    url: str,
    tmp_path: Path,
    *args: str,
    token: str = "tok",  # noqa: S107  # a test token
) -> tuple[int, str, str, float]:
    """`yoyaku ARGS --json` against `url` without retries; (code, stdout, stderr, seconds),
    its memory capped at 512 MiB so that an unbounded read fails instead of filling the
    machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("YOYAKU_")}
    env.update(
        YOYAKU_URL=url,
        YOYAKU_TOKEN=token,
        YOYAKU_CONFIG_DIR=str(tmp_path / "config"),
        YOYAKU_RETRIES="0",
        YOYAKU_TIMEOUT=str(TIMEOUT),
    )

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))

    started = time.monotonic()
    done = subprocess.run(
        [*yoyaku_command(), *args, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=cap,
    )
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


def _repeat(line: bytes, seconds: float, head: bytes = b"HTTP/1.1 200 OK\r\n") -> Handle:
    return endless(head, line, seconds, copies=64)


def _drip(opening: bytes, byte: bytes, every: float) -> Handle:
    def handle(conn: socket.socket) -> None:
        conn.sendall(opening)
        for _ in range(int(8 / every)):
            conn.sendall(byte)
            time.sleep(every)

    return handle


def _send(data: bytes, then_wait: float = 0.0) -> Handle:
    def handle(conn: socket.socket) -> None:
        conn.sendall(data)
        time.sleep(then_wait)

    return handle


ANSWERS: dict[str, Handle] = {
    "endless headers": _repeat(b"X-Pad: aaaaaaaaaaaaaaaa\r\n", 8),
    "one endless header line": _repeat(b"a" * 4096, 8),
    "a huge Content-Length": _send(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 99999999999\r\n"
        b"\r\n{",
        then_wait=3,
    ),
    "an endless body": _repeat(b"[" * 4096, 8, b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"),
    "an endless chunked body": _drip(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"10000\r\n" + b"x" * 65536 + b"\r\n",
        0.001,
    ),
    "a malformed status line": _send(b"HTTP/1.1 20O OK\r\nContent-Length: 2\r\n\r\n{}"),
    "no status line": _send(b"\r\n\r\n{}"),
    "a status line of NULs": _send(b"\0" * 70000),
    "a drip of header bytes": _drip(b"HTTP/1.1 200 OK\r\n", b"X", 0.2),
    "a drip of body bytes": _drip(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n",
        b" ",
        0.2,
    ),
    "a chunk size that never ends": _repeat(b"f", 8),
}


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_a_hostile_answer_ends_in_the_documented_error_within_a_bound(
    name: str, hostile: Callable[[Handle], Hostile], tmp_path: Path
) -> None:
    server = hostile(ANSWERS[name])
    code, stdout, stderr, seconds = run(server.url, tmp_path, "quota")
    assert code == 1, (stdout, stderr)
    assert "Traceback" not in stderr + stdout
    assert json.loads(stdout)["code"] == "no_answer", stdout
    assert seconds < TIMEOUT + 5, seconds
    server.close()
    assert len(server.received) == 1  # one connection, one request on it
    assert server.received[0].count(b" HTTP/1.1\r\n") == 1


def test_a_redirect_to_another_host_is_not_followed(
    hostile: Callable[[Handle], Hostile], tmp_path: Path
) -> None:
    elsewhere = hostile(_send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"))
    redirect = (
        f"HTTP/1.1 302 Found\r\nLocation: {elsewhere.url}/api/quotas/me/\r\n"
        "Content-Length: 0\r\n\r\n"
    )
    server = hostile(_send(redirect.encode()))
    code, stdout, stderr, seconds = run(server.url, tmp_path, "quota")
    assert code == 1, (stdout, stderr)
    assert "Traceback" not in stderr + stdout
    assert seconds < 10
    server.close()
    elsewhere.close()
    assert len(server.received) == 1
    assert elsewhere.received == []


def test_bytes_after_the_body_are_not_read_as_a_second_answer(
    hostile: Callable[[Handle], Hostile], tmp_path: Path
) -> None:
    """A body shorter than what follows it: the rest (an answer of its own, a refusal) is
    ignored, and the connection closed; the body itself (a list) is not the quota's document,
    which the client says (exit 1) without a traceback."""
    smuggled = (
        b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
        b"\r\n{}"
    )
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n[]"
    server = hostile(_send(answer + smuggled + b"\r\nX: y\r\n\r\n"))
    code, stdout, stderr, seconds = run(server.url, tmp_path, "quota")
    assert "Traceback" not in stderr + stdout, stderr
    assert code == 1, (stdout, stderr)
    assert "401" not in stdout
    assert json.loads(stdout)["code"] == "error"
    assert seconds < 10
    server.close()
    assert len(server.received) == 1


def _ok(conn: socket.socket) -> None:
    """An API refusal (404), so that a command ends after its first request."""
    body = b'{"error": "Not found.", "code": "not_found"}'
    conn.sendall(
        b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


@pytest.mark.parametrize("token", ["t\r\nX-Admin: 1", "t\nX: 1", "t\r", "t\r\n\r\nGET / HTTP/1.1"])
def test_a_token_with_line_breaks_or_nul_is_refused_before_connecting(
    token: str, hostile: Callable[[Handle], Hostile], tmp_path: Path
) -> None:
    server = hostile(_ok)
    code, stdout, stderr, _ = run(server.url, tmp_path, "quota", token=token)
    assert code == 1, (stdout, stderr)
    assert "Traceback" not in stderr + stdout
    server.close()
    assert server.received == []


@pytest.mark.parametrize(
    "job_id",
    ["a\r\nX-Admin: 1", "a HTTP/1.1\r\n\r\nGET /api/ HTTP/1.1\r\nHost: x", "a\x7fb", "a?b#c"],
)
def test_an_id_with_line_breaks_stays_data_in_the_request_line(
    job_id: str, hostile: Callable[[Handle], Hostile], tmp_path: Path
) -> None:
    server = hostile(_ok)
    code, stdout, stderr, _ = run(server.url, tmp_path, "job", job_id)
    assert code in (1, 2), (stdout, stderr)
    assert "Traceback" not in stderr + stdout
    server.close()
    for request in server.received:  # refused before connecting, or sent as data
        head = request.split(b"\r\n\r\n")[0].split(b"\r\n")
        assert head[0].startswith(b"GET /api/jobs/")
        assert head[0].endswith(b" HTTP/1.1")
        assert head[0].count(b" ") == 2
        assert b"\0" not in request
        assert not any(line.lower().startswith(b"x-admin") for line in head)


def test_a_file_name_with_line_breaks_is_refused_before_connecting(
    hostile: Callable[[Handle], Hostile], tmp_path: Path
) -> None:
    folder = write_files(
        tmp_path / "program",
        {"main.py": HELLO_MAIN, "config.yaml": HELLO_CONFIG, "a\r\nX-Admin: 1\r\n.py": "1\n"},
    )
    server = hostile(_ok)
    code, stdout, stderr, _ = run(server.url, tmp_path, "submit", str(folder))
    assert code == 1, (stdout, stderr)
    assert json.loads(stdout)["code"] == "refused_locally"
    server.close()
    assert server.received == []


def test_metadata_and_a_question_with_line_breaks_stay_in_the_body(
    hostile: Callable[[Handle], Hostile],
) -> None:
    """What `submit` sends them in: a JSON body, where a line break is escaped."""
    from yoyaku_client.errors import ApiError
    from yoyaku_client.transport import RetryPolicy, Transport

    server = hostile(_ok)
    document = {
        "question_id": "q\r\nX-Admin: 1",
        "metadata": {"note": "x\r\nX-Admin: 1\r\n\r\nGET / HTTP/1.1"},
    }
    transport = Transport(server.url, token="tok", retry=RetryPolicy.none())
    with pytest.raises(ApiError):
        transport.request("POST", "/submissions/", json=document)
    transport.close()
    server.close()
    (request,) = server.received
    head, _, body = request.partition(b"\r\n\r\n")
    assert not any(line.lower().startswith(b"x-admin") for line in head.split(b"\r\n")), head
    assert request.count(b" HTTP/1.1\r\n") == 1
    assert json.loads(body) == document


def test_a_nul_in_a_token_or_an_id_never_reaches_the_wire(
    hostile: Callable[[Handle], Hostile],
) -> None:
    """NUL cannot come through argv or the environment; through the library it is refused."""
    from yoyaku_client.errors import YoyakuError
    from yoyaku_client.transport import RetryPolicy, Transport

    server = hostile(_ok)
    for token, path in (("t\0", "/jobs/a/"), ("t", "/jobs/a\0b/")):
        transport = Transport(server.url, token=token, retry=RetryPolicy.none())
        with pytest.raises((YoyakuError, ValueError)):
            transport.request("GET", path)
        transport.close()
    server.close()
    for request in server.received:
        assert b"\0" not in request
