"""Log injection: request data with CR, LF, ESC and other control characters reaches log lines
(the path in the access line and in Django's "Not Found", a header in an exception), and the
plain format writes each record on one line with those characters escaped; a traceback follows
on continuation lines. JSON lines are one line by JSON's escaping."""

from __future__ import annotations

import io
import json
import logging
import re
import socket
import unicodedata
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from apps.core.logcontext import CONTINUATION, JsonFormatter, PlainFormatter, log_escape
from tests.processes import Start, start_gunicorn, stop

# How a real record's line begins: `asctime` then the level.
RECORD_START = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) "
)
FORGED = "2026-11-25 13:00:00,000 INFO yoyaku.request: GET /admin/ 200 1.0 ms"
# The attacker's path: a line break, a whole forged log line, a screen clear.
ATTACK_PATH = "/api/nothing%0D%0A" + FORGED.replace(" ", "%20") + "%1B[2J%C2%9B31m%E2%80%AE"
UNSAFE_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Cs"}


def unsafe_characters(text: str) -> list[str]:
    """The characters of `text` that are neither printable nor the record separator LF."""
    return [c for c in text if c != "\n" and unicodedata.category(c) in UNSAFE_CATEGORIES]


@pytest.fixture
def console() -> Iterator[io.StringIO]:
    """What the configured console handler (settings.LOGGING: its ContextFilter and the plain
    formatter) writes, captured from the handler itself."""
    [handler] = [h for h in logging.getLogger().handlers if h.get_name() == "console"]
    assert isinstance(handler, logging.StreamHandler)
    if settings.LOG_FORMAT != "plain":
        pytest.skip("the suite runs with LOG_FORMAT=json")
    assert isinstance(handler.formatter, PlainFormatter)
    stream = io.StringIO()
    previous = handler.setStream(stream)
    try:
        yield stream
    finally:
        handler.setStream(previous)


@pytest.fixture
def json_console() -> Iterator[io.StringIO]:
    """The console handler with the JSON formatter, as LOG_FORMAT=json configures it."""
    [handler] = [h for h in logging.getLogger().handlers if h.get_name() == "console"]
    assert isinstance(handler, logging.StreamHandler)
    stream = io.StringIO()
    previous, formatter = handler.setStream(stream), handler.formatter
    handler.setFormatter(JsonFormatter())
    try:
        yield stream
    finally:
        handler.setFormatter(formatter)
        handler.setStream(previous)


@pytest.mark.django_db
def test_a_forged_line_in_the_path_stays_escaped_on_the_real_record_lines(
    console: io.StringIO,
) -> None:
    response = Client().get(ATTACK_PATH, HTTP_X_REQUEST_ID="rid-forge")
    assert response.status_code == HTTPStatus.NOT_FOUND

    lines = console.getvalue().splitlines()
    about = [line for line in lines if "rid-forge" in line]
    # The access line and Django's "Not Found": two records, two lines, nothing more.
    assert len(about) == 2, lines
    assert len(lines) == len(about), lines
    for line in about:
        assert RECORD_START.match(line), line
        assert "/api/nothing\\r\\n" + FORGED + "\\x1b[2J\\x9b31m\\u202e" in line
        assert unsafe_characters(line) == []
    [access] = [line for line in about if " yoyaku.request " in line]
    assert " 404 " in access
    assert not any(line.startswith(FORGED) for line in lines)


@pytest.mark.django_db
@pytest.mark.urls("tests.core.urls")
def test_a_header_in_an_exception_stays_inside_its_traceback(console: io.StringIO) -> None:
    client = Client(raise_request_exception=False)
    probe = "x\r\n" + FORGED + "\x1b]0;owned\x07\u2028" + FORGED

    response = client.get("/api/test/header-crash/", HTTP_X_PROBE=probe)
    assert response.status_code == HTTPStatus.INTERNAL_SERVER_ERROR

    lines = console.getvalue().splitlines()
    records = [line for line in lines if RECORD_START.match(line)]
    continuation = [line for line in lines if not RECORD_START.match(line)]
    assert records, lines
    assert continuation, "the traceback is missing"
    assert all(line.startswith(CONTINUATION) for line in continuation), continuation
    assert not any(line.startswith(FORGED) for line in lines)
    assert unsafe_characters(console.getvalue()) == []
    # A line break inside the exception's text stays a traceback line break, behind the
    # continuation mark; every other control character is escaped.
    assert CONTINUATION + "RuntimeError: unexpected X-Probe: x\\r" in continuation
    assert CONTINUATION + FORGED + "\\x1b]0;owned\\x07\\u2028" + FORGED in continuation


@pytest.mark.django_db
def test_json_lines_carry_the_path_exactly_one_record_per_line(
    json_console: io.StringIO,
) -> None:
    response = Client().get(ATTACK_PATH, HTTP_X_REQUEST_ID="rid-json")
    assert response.status_code == HTTPStatus.NOT_FOUND

    text = json_console.getvalue()
    assert "\x1b" not in text
    assert "\r" not in text
    records = [json.loads(line) for line in text.splitlines()]
    access = next(r for r in records if r["logger"] == "yoyaku.request")
    assert access["path"] == "/api/nothing\r\n" + FORGED + "\x1b[2J\x9b31m\u202e"
    assert all(r["request_id"] == "rid-json" for r in records)


def _record(message: str, *args: object, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    return logging.LogRecord("t", logging.WARNING, __file__, 1, message, args, exc_info)


@hypothesis_settings(deadline=None)  # shared machines: no timing in tests
@given(st.text(alphabet=st.characters(exclude_categories=())))
def test_any_message_is_one_line_with_nothing_unprintable_in_it(text: str) -> None:
    formatter = PlainFormatter("%(levelname)s %(message)s")

    line = formatter.format(_record("got %s", text))

    assert line.splitlines() == [line]
    assert unsafe_characters(line) == []
    assert "\n" not in line


@hypothesis_settings(deadline=None)  # shared machines: no timing in tests
@given(st.text(alphabet=st.characters(exclude_categories=())))
def test_any_exception_text_stays_on_continuation_lines(text: str) -> None:
    formatter = PlainFormatter("%(levelname)s %(message)s")
    try:
        raise ValueError(text)
    except ValueError as exc:
        record = _record("failed", exc=exc)

    first, *rest = formatter.format(record).split("\n")

    assert first == "WARNING failed"
    assert rest, "no traceback"
    assert all(line.startswith(CONTINUATION) for line in rest)
    assert unsafe_characters("\n".join(rest)) == []


def test_log_escape_writes_visible_escapes_and_leaves_printable_text_alone() -> None:
    assert log_escape("résumé データ /api/x?q=1") == "résumé データ /api/x?q=1"
    assert log_escape("a\r\nb\tc\x1b[0m\x7f\x85\u202e\u200b\udcff") == (
        "a\\r\\nb\\tc\\x1b[0m\\x7f\\x85\\u202e\\u200b\\udcff"
    )
    assert log_escape("one\ntwo\x1b", keep_newlines=True) == "one\ntwo\\x1b"


def test_a_formatted_record_leaves_the_record_as_other_handlers_need_it() -> None:
    try:
        raise ValueError("a\nb")
    except ValueError as exc:
        record = _record("x", exc=exc)
    PlainFormatter("%(message)s").format(record)

    assert record.exc_text is None
    assert "ValueError: a\nb" in logging.Formatter("%(message)s").format(record)


# --- the web process as it runs ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_behind_gunicorn_a_forged_path_writes_no_line_of_its_own(
    start_process: Start, tmp_path: Path
) -> None:
    port, process = start_gunicorn(start_process, "web", workers=1, LOG_FORMAT="plain")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            f"GET {ATTACK_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            "X-Request-ID: rid-gunicorn\r\n\r\n".encode()
        )
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    assert raw.startswith(b"HTTP/1.1 404"), raw[:200]
    stop(process)

    log = (tmp_path / "web.log").read_bytes()
    assert b"\x1b" not in log
    assert b"\r" not in log
    assert "\u202e".encode() not in log
    lines = log.decode().splitlines()
    about = [line for line in lines if "rid-gunicorn" in line]
    assert len(about) == 2, lines  # the access line and Django's "Not Found"
    for line in about:
        assert RECORD_START.match(line), line
        assert "/api/nothing\\r\\n" + FORGED + "\\x1b[2J" in line
    assert [line for line in lines if FORGED in line] == about
