"""Files at once under attack: a real `yoyaku submit --parallel` against the live server
through the fault proxy (a hostile folder: two large files with the same bytes; kills at any
point; a second process with the same key)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from apps.jobs.models import Job
from apps.submissions.models import SubmissionFile
from tests.client.conftest import HELLO_CONFIG, HELLO_MAIN, Cli, CliResult, write_files
from tests.client.proxy import FaultProxy
from tests.processes import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MIB = 1024 * 1024
PATCH_PATH = r"^/api/uploads/[^/]+/$"


def _content(size: int, tag: bytes = b"") -> bytes:
    line = tag + b"# " + b"0123456789abcdef" * 63 + b"\n"
    return (line * (size // len(line) + 1))[:size]


@pytest.fixture
def small_files(settings: Any) -> int:
    """Files over 1 MiB are large (resumable)."""
    settings.MAX_UPLOAD_FILE_SIZE = MIB
    return MIB


def _kill(process: subprocess.Popen[str], sig: signal.Signals) -> None:
    os.kill(process.pid, sig)
    process.communicate(timeout=60)


def test_two_large_files_with_the_same_bytes_carried_on_at_once_are_both_attached(
    cli: Cli, proxy: FaultProxy, tmp_path: Path, small_files: int
) -> None:
    same = _content(3 * MIB)
    folder = write_files(
        tmp_path / "twins",
        {"main.py": HELLO_MAIN, "config.yaml": HELLO_CONFIG, "a.py": same, "b.py": same},
    )
    # The first run is killed once a PATCH of the large files is under way: the upload it
    # made is kept in the state file that both files' contents name.
    held = proxy.pause("PATCH", PATCH_PATH)
    process = cli.via(proxy.url).popen(
        "submit", str(folder), "--json", YOYAKU_UPLOAD_CHUNK_SIZE=str(MIB)
    )
    assert held.reached.wait(timeout=120), "no PATCH reached the proxy"
    _kill(process, signal.SIGKILL)
    held.go.set()
    assert held.done.wait(timeout=120)

    again = cli.via(proxy.url).json("submit", str(folder), YOYAKU_UPLOAD_CHUNK_SIZE=str(MIB))

    digest = hashlib.sha256(same).hexdigest()
    rows = {f.filename: f for f in SubmissionFile.objects.all()}
    assert sorted(rows) == ["a.py", "b.py", "config.yaml", "main.py"]
    assert (rows["a.py"].sha256, rows["b.py"].sha256) == (digest, digest)
    assert (rows["a.py"].size, rows["b.py"].size) == (len(same), len(same))
    assert [j.pk for j in Job.objects.all()] == [again["job_id"]]
    assert list((cli.config_dir / "uploads").glob("resumable-*.json")) == []


FILES_PATH = r"^/api/submissions/[0-9a-f]{32}/files/$"


def test_no_file_starts_after_a_refusal(cli: Cli, proxy: FaultProxy, tmp_path: Path) -> None:
    files: dict[str, bytes | str] = {"main.py": HELLO_MAIN, "a.exe": "MZ"}
    files.update({f"z{i}.py": f"X = {i}\n" for i in range(8)})
    folder = write_files(tmp_path / "refused", files)
    # In this order after main.py (the draft's): a.exe, refused at once, then z0..z7. The
    # sender that a.exe's refusal freed must not take z1 before the run stops.
    result = cli.via(proxy.url).run(
        "submit",
        str(folder / "main.py"),
        str(folder / "a.exe"),
        *(str(folder / f"z{i}.py") for i in range(8)),
        "--skip-local-checks",
        "--json",
    )

    assert result.code == 1
    assert result.json()["code"] == "invalid_extension"
    # a.exe and the one file under way beside it: none started after the refusal.
    assert proxy.count("POST", FILES_PATH) <= 2, (proxy.log, result.stderr)


@pytest.fixture
def many(tmp_path: Path) -> Path:
    """config.yaml creates the draft; main.py and part0..5.py (about 120 KB each) follow."""
    files: dict[str, bytes | str] = {"main.py": HELLO_MAIN, "config.yaml": HELLO_CONFIG}
    for i in range(6):
        files[f"part{i}.py"] = f"# part {i}\n" + "x = 1\n" * 20_000
    return write_files(tmp_path / "many", files)


def _killed_with_two_files_under_way(cli: Cli, proxy: FaultProxy, folder: Path, key: str) -> None:
    """A run of `key` killed (SIGKILL) while its two senders are held at half a body; returns
    once the proxy forwarded or gave up both, so the server holds what it will hold."""
    held = [proxy.pause("POST", FILES_PATH) for _ in range(2)]
    killed = cli.via(proxy.url).popen("submit", str(folder), "--idempotency-key", key)
    for rule in held:
        assert rule.reached.wait(timeout=60)
    _kill(killed, signal.SIGKILL)
    for rule in held:
        rule.go.set()
        assert rule.done.wait(timeout=60)


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _state_files(cli: Cli) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in (cli.config_dir / "uploads").glob("*.json")]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_while_two_files_are_held_ends_at_once_and_a_rerun_finishes(
    cli: Cli, proxy: FaultProxy, many: Path, sig: signal.Signals
) -> None:
    held = [proxy.pause("POST", FILES_PATH), proxy.pause("POST", FILES_PATH)]
    process = cli.via(proxy.url).popen("submit", str(many), "--json")
    for rule in held:
        assert rule.reached.wait(timeout=60), "two uploads were not under way at once"
    os.kill(process.pid, sig)
    # It ends while both requests are still held (they would hold it 120 s).
    out, err = process.communicate(timeout=60)
    assert process.returncode == (130 if sig == signal.SIGINT else -sig), err
    if sig == signal.SIGINT:
        assert "interrupted; run the same command again to continue" in err
        assert "Traceback" not in err
        assert out == ""
    for rule in held:
        rule.go.set()
        assert rule.done.wait(timeout=60)
    for state in _state_files(cli):  # each state file is whole JSON
        assert state["job_id"] == ""

    again = cli.via(proxy.url).json("submit", str(many))

    assert sorted(SubmissionFile.objects.values_list("filename", flat=True)) == _names(many)
    assert [j.pk for j in Job.objects.all()] == [again["job_id"]]


CREATE_PATH = r"^/api/submissions/$"
JOBS_PATH = r"^/api/jobs/$"
#: Where each run is killed: `held` requests of a kind held at half their bodies (or, for
#: the job, whole) after `skip` others of that run (every sender held: no file passes while
#: the kill is sent, whatever the machine's load); the signal rotates through SIGKILL,
#: SIGINT, SIGTERM. At most 1 + 3 + 4 + 5 + 3 + 4 files land before the last point.
KILL_POINTS = [
    (CREATE_PATH, 0, 1),
    (FILES_PATH, 0, 3),
    (FILES_PATH, 1, 3),
    (FILES_PATH, 2, 3),
    (FILES_PATH, 0, 3),
    (FILES_PATH, 1, 3),
    (JOBS_PATH, 0, 1),
]


def test_killed_again_and_again_at_many_points_then_run_again_makes_one_job_with_every_file(
    cli: Cli, proxy: FaultProxy, tmp_path: Path
) -> None:
    files: dict[str, bytes | str] = {"main.py": HELLO_MAIN, "config.yaml": HELLO_CONFIG}
    for i in range(20):
        files[f"part{i:02}.py"] = f"# part {i}\n" + "x = 1\n" * 20_000
    folder = write_files(tmp_path / "kills", files)
    chosen = random.Random(20261129)
    signals = [signal.SIGKILL, signal.SIGINT, signal.SIGTERM]
    for round_, (path, skip, count) in enumerate(KILL_POINTS):
        held = [proxy.pause("POST", path, skip=skip) for _ in range(count)]
        process = cli.via(proxy.url).popen("submit", str(folder), "--json", "--parallel", "3")
        for rule in held:
            assert rule.reached.wait(timeout=60), f"round {round_}: {path} was never held"
        time.sleep(chosen.uniform(0, 0.05))
        process.send_signal(signals[round_ % 3])
        process.communicate(timeout=60)
        assert process.returncode != 0
        for rule in held:
            rule.go.set()
            assert rule.done.wait(timeout=60)
        for state in _state_files(cli):  # each state file is whole JSON, whatever the kill
            assert state["key"]
        assert Job.objects.count() <= 1
        assert SubmissionFile.objects.count() <= len(files)

    again = cli.via(proxy.url).json("submit", str(folder))

    stored = SubmissionFile.objects.filter(submission_id=again["submission_id"])
    assert sorted(f.filename for f in stored) == sorted(files)
    assert [j.pk for j in Job.objects.all()] == [again["job_id"]]


@pytest.mark.parametrize("draft", [False, True])
def test_two_runs_of_one_key_at_once_end_with_the_one_job(
    cli: Cli, proxy: FaultProxy, many: Path, draft: bool
) -> None:
    if draft:  # a killed run left a draft of the key: both runs carry it on at once
        _killed_with_two_files_under_way(cli, proxy, many, "ci-42")
    # Both runs hold their first two files: without a draft, each made its own before either
    # sealed one.
    held = [proxy.pause("POST", FILES_PATH) for _ in range(4)]
    runs = [
        cli.via(proxy.url).popen("submit", str(many), "--json", "--idempotency-key", "ci-42")
        for _ in range(2)
    ]
    for rule in held:
        assert rule.reached.wait(timeout=60), "both runs were not uploading at once"
    for rule in held:
        rule.go.set()
    ends = [run.communicate(timeout=120) for run in runs]

    for run, (_out, err) in zip(runs, ends, strict=True):
        assert run.returncode == 0, err
    bodies = [json.loads(out) for out, _err in ends]
    job = Job.objects.get()
    assert [b["job_id"] for b in bodies] == [job.pk, job.pk]
    # One made it; the other's request for it was answered with it (a replay of the key).
    assert sorted(b["idempotent_hit"] for b in bodies) == [False, True]
    assert [b["submission_id"] for b in bodies] == [job.submission_id] * 2
    names = SubmissionFile.objects.filter(submission_id=job.submission_id)
    assert sorted(f.filename for f in names) == _names(many)


@pytest.mark.parametrize("change", ["truncated", "rewritten", "grown"])
def test_a_file_changed_while_it_is_sent_beside_another_stores_only_the_bytes_hashed(
    cli: Cli, proxy: FaultProxy, tmp_path: Path, change: str
) -> None:
    big = "# big\n" + "x = 1\n" * 3_000_000  # 18 MB: past the proxy's and the kernel's buffers
    folder = write_files(
        tmp_path / "changing",
        {"main.py": HELLO_MAIN, "config.yaml": HELLO_CONFIG, "zbig.py": big},
    )
    # config.yaml makes the draft; main.py and zbig.py are held at once, half sent.
    held = [proxy.pause("POST", FILES_PATH) for _ in range(2)]
    process = cli.via(proxy.url).popen("submit", str(folder), "--json")
    for rule in held:
        assert rule.reached.wait(timeout=60)
    with (folder / "zbig.py").open("r+") as handle:
        if change == "truncated":
            handle.truncate(1000)
        elif change == "rewritten":  # the same size, other bytes at the end
            handle.seek(len(big) - 6)
            handle.write("y = 2\n")
        else:  # appended to: the bytes hashed are still the first ones
            handle.seek(0, os.SEEK_END)
            handle.write("y = 2\n" * 1000)
    for rule in held:
        rule.go.set()
    out, err = process.communicate(timeout=120)

    assert "Traceback" not in err
    rows = {f.filename: f for f in SubmissionFile.objects.all()}
    if change == "grown":
        assert process.returncode == 0, err
        assert rows["zbig.py"].size == len(big)
        assert rows["zbig.py"].sha256 == hashlib.sha256(big.encode()).hexdigest()
        return
    assert process.returncode == 1, err
    assert json.loads(out)["success"] is False
    assert "zbig.py" not in rows  # neither its bytes cut short nor others under the old hash
    assert rows["main.py"].sha256 == hashlib.sha256(HELLO_MAIN.encode()).hexdigest()
    assert Job.objects.count() == 0


def _canned(status: str, code: str, extra: str = "") -> bytes:
    body = f'{{"success": false, "code": "{code}", "error": "Refused by the test."}}'.encode()
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def test_a_file_under_way_is_not_sent_again_once_another_was_refused(
    cli: Cli, proxy: FaultProxy, tmp_path: Path
) -> None:
    folder = write_files(
        tmp_path / "two",
        {"main.py": HELLO_MAIN, "config.yaml": HELLO_CONFIG, "zz.py": "Z = 1\n"},
    )
    # config.yaml makes the draft; main.py and zz.py go at once, both held until both have
    # arrived: the first to arrive is then told to come back in 2 s (503), and the other is
    # refused for good (storage quota) meanwhile.
    busy = proxy.answer(
        "POST",
        FILES_PATH,
        _canned("503 Service Unavailable", "unavailable", "Retry-After: 2\r\n"),
        held=True,
    )
    refused = proxy.answer(
        "POST", FILES_PATH, _canned("429 Too Many Requests", "storage_quota_exceeded"), held=True
    )
    process = cli.via(proxy.url).popen("submit", str(folder), "--json", YOYAKU_RETRY_MAX_DELAY="5")
    assert busy.reached.wait(timeout=60)
    assert refused.reached.wait(timeout=60), "the two files were not under way at once"
    busy.go.set()
    # The one told to come back waits for the other file (still under way) to end.
    wait_for(lambda: busy.done.is_set(), 60, "the 503 to be answered")
    refused.go.set()
    out, err = process.communicate(timeout=120)
    result = CliResult(process.returncode, out, err)
    assert result.code != 0, result.stderr
    assert result.json()["code"] == "storage_quota_exceeded"
    # The one told to come back sent no body again (at most its head): the run had failed.
    assert [f for f in proxy.forwarded if re.search(FILES_PATH, f[1])] == []
    assert sorted(SubmissionFile.objects.values_list("filename", flat=True)) == ["config.yaml"]


@pytest.mark.parametrize("after", ["99999999999999999999", "1" + "0" * 400, "-5", "soon"])
@pytest.mark.parametrize("parallel", ["1", "2"])
def test_a_503_with_an_endless_or_odd_retry_after_ends_the_run_well(
    cli: Cli, proxy: FaultProxy, many: Path, after: str, parallel: str
) -> None:
    # The first upload after the draft's is told to come back after `after` seconds: alone,
    # the client's policy reads it (capped, or ignored); beside another file, it is sent
    # again once that one ends.
    proxy.answer(
        "POST",
        FILES_PATH,
        _canned("503 Service Unavailable", "unavailable", f"Retry-After: {after}\r\n"),
    )

    body = cli.via(proxy.url).json("submit", str(many), "--parallel", parallel)

    assert [f["filename"] for f in body["files"]] == _names(many)
    assert sorted(SubmissionFile.objects.values_list("filename", flat=True)) == _names(many)
    assert [j.pk for j in Job.objects.all()] == [body["job_id"]]


def test_the_bars_show_at_most_parallel_files_and_count_each_file_once(
    cli: Cli, proxy: FaultProxy, many: Path
) -> None:
    # Two uploads held at once, so that frames are drawn with both bars up.
    held = [proxy.pause("POST", FILES_PATH), proxy.pause("POST", FILES_PATH)]
    process = cli.via(proxy.url).popen("submit", str(many), "--progress", "--parallel", "3")
    for rule in held:
        assert rule.reached.wait(timeout=60)
    for rule in held:
        rule.go.set()
    _out, err = process.communicate(timeout=120)

    assert process.returncode == 0, err
    # Only the bars' own sequences: cursor up, clear down, colours.
    plain = re.sub(r"\x1b\[(\d+A|J|[\d;]*m)", "", err)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", plain), repr(plain[-500:])
    # Each frame (what follows a clear) shows at most three files' bars beside the overall.
    for frame in err.split("\x1b[J")[1:]:
        bars = [line for line in frame.split("\n") if line.startswith("  ") and "━" in line]
        assert len(bars) <= 3, frame
    lines = re.findall(r"\[(\d+)/(\d+) files\] (\S+)", plain)
    assert [int(k) for k, _n, _name in lines] == list(range(1, len(_names(many)) + 1))
    assert sorted(name for _k, _n, name in lines) == _names(many)


def test_a_run_whose_draft_another_run_of_the_key_sealed_meanwhile_ends_with_its_job(
    cli: Cli, proxy: FaultProxy, many: Path
) -> None:
    _killed_with_two_files_under_way(cli, proxy, many, "ci-43")
    # Each run sends one file at a time, so the first two uploads held are one of each run:
    # both carry the draft on. One is let go: its run sends the rest and seals the draft with
    # the key's job; then the other's file reaches the sealed draft.
    held = [proxy.pause("POST", FILES_PATH) for _ in range(2)]
    runs = [
        cli.via(proxy.url).popen(
            "submit", str(many), "--json", "--idempotency-key", "ci-43", "--parallel", "1"
        )
        for _ in range(2)
    ]
    for rule in held:
        assert rule.reached.wait(timeout=60), "both runs were not sending"
    held[0].go.set()
    wait_for(Job.objects.exists, 60, "the job of the run let go")
    held[1].go.set()
    ends = [run.communicate(timeout=120) for run in runs]

    for run, (_out, err) in zip(runs, ends, strict=True):
        assert run.returncode == 0, err
    job = Job.objects.get()
    assert [json.loads(out)["job_id"] for out, _err in ends] == [job.pk, job.pk]
