"""Files at once: a real `yoyaku submit` sends the files after the draft's first
`--parallel` (2) at a time, through the fault proxy on loopback to the live server. A slow file
holds back no other, no more than `--parallel` are ever under way, and a run killed while
several are under way is continued by the next run with one job and every file once."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from apps.jobs.models import Job
from apps.submissions.models import Submission, SubmissionFile
from tests.client.conftest import HELLO_CONFIG, HELLO_MAIN, Cli, write_files
from tests.client.proxy import FaultProxy
from tests.processes import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

FILES_PATH = r"^/api/submissions/[0-9a-f]{32}/files/$"
CREATE_PATH = r"^/api/submissions/$"
PARTS = 6


@pytest.fixture
def many(tmp_path: Path) -> Path:
    """Sorted: config.yaml creates the draft; main.py and part0..5.py (about 120 KB each)
    follow, several at once."""
    files: dict[str, bytes | str] = {"main.py": HELLO_MAIN, "config.yaml": HELLO_CONFIG}
    for i in range(PARTS):
        files[f"part{i}.py"] = f"# part {i}\n" + "x = 1\n" * 20_000
    return write_files(tmp_path / "many", files)


def _stored() -> list[str]:
    return sorted(SubmissionFile.objects.values_list("filename", flat=True))


def _all_names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _finish(process: subprocess.Popen[str]) -> str:
    _out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return err


@pytest.mark.parametrize("parallel", [2, 3])
def test_a_held_file_holds_back_no_other_and_no_more_than_parallel_go_at_once(
    cli: Cli, proxy: FaultProxy, many: Path, parallel: int
) -> None:
    # The first `parallel - 1` files after the draft are held at half their bodies; the one
    # slot left sends every other file meanwhile.
    held = proxy.pause("POST", FILES_PATH, times=parallel - 1)
    process = cli.via(proxy.url).popen(
        "submit", str(many), "--json", "--progress", "--parallel", str(parallel)
    )
    assert held.reached.wait(timeout=60), "no upload reached the proxy"
    others = PARTS + 1 - (parallel - 1)
    wait_for(
        lambda: len([f for f in proxy.forwarded if re.search(FILES_PATH, f[1])]) == others,
        60,
        "the other files to pass the held ones",
    )
    assert Job.objects.count() == 0  # the job waits for every file
    held.go.set()
    err = _finish(process)

    assert proxy.most_at_once("POST", FILES_PATH) == parallel
    assert proxy.count("POST", CREATE_PATH) == 1
    assert proxy.count("POST", FILES_PATH) == PARTS + 1  # every file once, none retried
    assert _stored() == _all_names(many)
    assert Job.objects.count() == 1
    # The "k/N files" lines count up once per file, whatever order the files ended in.
    lines = re.findall(r"\[(\d+)/(\d+) files\] (\S+)", err)
    assert [int(k) for k, _n, _name in lines] == list(range(1, PARTS + 3))
    assert {n for _k, n, _name in lines} == {str(PARTS + 2)}
    assert sorted(name for _k, _n, name in lines) == _all_names(many)


def test_parallel_1_sends_one_file_at_a_time(cli: Cli, proxy: FaultProxy, many: Path) -> None:
    body = cli.via(proxy.url).json("submit", str(many), "--parallel", "1")

    assert proxy.most_at_once("POST", FILES_PATH) == 1
    assert [f["filename"] for f in body["files"]] == _all_names(many)
    assert {f["action"] for f in body["files"]} == {"uploaded"}
    assert _stored() == _all_names(many)


def test_killed_while_two_files_were_under_way_then_run_again_sends_only_the_rest(
    cli: Cli, proxy: FaultProxy, many: Path
) -> None:
    # Both slots held at half a body (one rule each, so each request's end can be awaited).
    held = [proxy.pause("POST", FILES_PATH), proxy.pause("POST", FILES_PATH)]
    process = cli.via(proxy.url).popen("submit", str(many), "--json")
    for rule in held:
        assert rule.reached.wait(timeout=60), "two uploads were not under way at once"
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL
    for rule in held:
        rule.go.set()
    # What the kernel held of a dead client's body may still reach the server: wait until the
    # proxy forwarded or gave up each held request, then read what the server stored.
    for rule in held:
        assert rule.done.wait(timeout=60)
    submission = Submission.objects.get()
    stored = _stored()
    assert "config.yaml" in stored
    assert len(stored) <= 3  # the draft's file and at most the two under way
    assert Job.objects.count() == 0

    again = cli.via(proxy.url).json("submit", str(many))

    assert again["submission_id"] == submission.pk
    assert again["resumed"] is True
    actions = {f["filename"]: f["action"] for f in again["files"]}
    assert actions == {
        name: "already stored" if name in stored else "uploaded" for name in _all_names(many)
    }
    assert _stored() == _all_names(many)
    assert SubmissionFile.objects.count() == PARTS + 2  # every file once
    assert [j.pk for j in Job.objects.all()] == [again["job_id"]]
    # The two held in the first run, then each file the server did not have, once.
    assert proxy.count("POST", FILES_PATH) == 2 + PARTS + 2 - len(stored)
