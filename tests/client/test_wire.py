"""A direct request is built as httpx builds it (`yoyaku_client.wire`): the same request
target, `Host`, `Content-Length` and JSON body, whatever the path, query and body; a base URL
the direct path does not take goes to httpx; a command to a plain-HTTP server never imports
httpx."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from yoyaku_client.direct import direct_possible
from yoyaku_client.transport import Transport
from yoyaku_client.wire import Request, Response, Timeout, api_url

BASES = ["http://127.0.0.1:8000", "http://Example.COM", "http://h:80/prefix/", "http://h:9/a/../b"]
PATHS = ["/me/", "/jobs/abc/", "/jobs/../me/", "/a/./b/", "/../../x", "/jobs/a?b#c/", "/é ü/"]
PARAMS: list[dict[str, Any] | None] = [
    None,
    {"page": 2, "status": "queued"},
    {"a": "x y", "b": True, "c": [1, 2], "d": "é/&=", "e": False, "f": ""},
]
BODIES: list[Any] = [None, {"submission_id": "s ü", "n": 1.5, "ok": None}, [1, "two"], "text"]


def _httpx_request(
    base: str, method: str, path: str, params: Any, json: Any, headers: dict[str, str]
) -> httpx.Request:
    api = httpx.URL(f"{base.rstrip('/')}/api/")
    target = quote(path, safe="/")
    url = api.copy_with(raw_path=api.raw_path + target.lstrip("/").encode())
    return httpx.Request(method, url, params=params, json=json, headers=headers)


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("method", ["GET", "POST", "DELETE", "PATCH"])
def test_a_request_is_built_as_httpx_builds_it(base: str, path: str, method: str) -> None:
    api = api_url(base.rstrip("/"))
    assert api is not None
    for params in PARAMS:
        for json in BODIES:
            headers = {"User-Agent": "yoyaku-client/t", "Authorization": "Bearer tok"}
            ours = Request(
                method, api, quote(path, safe="/"), params=params, json=json, headers=headers
            )
            theirs = _httpx_request(base, method, path, params, json, headers)
            assert ours.url.raw_path == theirs.url.raw_path
            # Names as sent (httpx lists them in lower case), values and order the same.
            assert [(k.lower(), v) for k, v in ours.headers.multi_items()] == [
                (k.lower(), v) for k, v in theirs.headers.multi_items()
            ]
            assert ours.read() == theirs.read()
            assert str(ours.url) == str(theirs.url)


@pytest.mark.parametrize(
    "base",
    [
        "https://h",
        "http://[::1]:8000",
        "http://user:pw@h",
        "http://h/a%20b",
        "http://h/é",
        "http://h:99999",
    ],
)
def test_a_base_url_the_direct_path_does_not_take_goes_to_httpx(base: str) -> None:
    assert api_url(base) is None


def test_a_header_that_is_not_ascii_refuses_the_request_as_httpx_does() -> None:
    api = api_url("http://h")
    assert api is not None
    with pytest.raises(UnicodeEncodeError):
        Request("GET", api, "/me/", params=None, json=None, headers={"Authorization": "é"})
    with pytest.raises(UnicodeEncodeError):
        httpx.Request("GET", "http://h/api/me/", headers={"Authorization": "é"})


def test_an_answer_reads_as_httpxs() -> None:
    head = [("Content-Type", "application/json; charset=latin-1"), ("Retry-After", "3")]
    body = '{"error": "é"}'.encode("latin-1")
    ours = Response(409, head, body, None)
    theirs = httpx.Response(409, headers=head, content=body)
    assert ours.text == theirs.text
    assert ours.headers["retry-after"] == theirs.headers["retry-after"] == "3"
    assert ours.headers.get("X-None") is None
    assert "Retry-After" in ours.headers
    assert Response(200, [], b'{"a": [1]}', None).json() == {"a": [1]}


def test_timeouts_are_read_from_seconds_or_httpx() -> None:
    assert Timeout.of(5) == Timeout(5.0, 5.0, 5.0, 5.0)
    assert Timeout.of(httpx.Timeout(1.0, read=2.0)) == Timeout(1.0, 2.0, 1.0, 1.0)
    assert Timeout.of(None).read == 120.0


def test_a_command_to_a_plain_http_server_never_imports_httpx() -> None:
    code = (
        "import sys\n"
        "from yoyaku_client.cli import main\n"
        "from yoyaku_client import Client\n"
        "c = Client('http://127.0.0.1:9', token='t')\n"
        "assert 'httpx' not in sys.modules and 'ssl' not in sys.modules, 'imported'\n"
        "try:\n"
        "    c.transport.request('GET', '/me/')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, 'httpx' in sys.modules)\n"
    )
    env_code = (
        "import os; [os.environ.pop(k) for k in list(os.environ) if k.lower().endswith('_proxy')]\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", env_code + code], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    # A connection refused is reported as before: httpx is imported for its error then.
    assert done.stdout.split() == ["TransportError", "True"]


@pytest.mark.parametrize(
    ("variable", "direct"),
    [(None, True), ("HTTP_PROXY", False), ("http_proxy", False), ("ALL_PROXY", False)],
)
def test_a_proxy_in_the_environment_sends_the_requests_through_httpx(
    monkeypatch: pytest.MonkeyPatch, variable: str | None, direct: bool
) -> None:
    for name in list(os.environ):
        if name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)
    if variable is not None:
        monkeypatch.setenv(variable, "http://proxy.invalid:3128")
    assert direct_possible("http://127.0.0.1:8000") is direct
    assert Transport("http://127.0.0.1:8000")._direct is direct
