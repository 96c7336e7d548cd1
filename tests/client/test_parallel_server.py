"""The server under a client that sends files at once: a real `yoyaku submit --parallel`
against the web process as production runs it (gunicorn with the product's worker, on
loopback), with a client address's share of the spool budget smaller than the bodies it sends
at once; and against the live server, more files than a submission holds, more bytes than the
storage quota, and names that differ only by case, all at once."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from apps.jobs.models import Job
from apps.submissions.models import SubmissionFile
from tests.client.conftest import HELLO_CONFIG, HELLO_MAIN, Cli, token_for, write_files
from tests.factories.users import make_user
from tests.processes import Start, start_gunicorn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MIB = 1024 * 1024


def _stored() -> list[str]:
    return sorted(SubmissionFile.objects.values_list("filename", flat=True))


def test_bodies_past_a_clients_spool_share_are_refused_503_and_the_client_still_sends_each_once(
    start_process: Start, tmp_path: Path
) -> None:
    # One upload body of this client's at a time fits its share (3 MiB); four go at once.
    port, _ = start_gunicorn(
        start_process, "web", 1, MAX_REQUEST_BODY_SIZE=str(12 * MIB), WEB_CONCURRENCY="1"
    )
    user = make_user(username="parallel")
    cli = Cli(f"http://127.0.0.1:{port}", token_for(user), tmp_path / "config", {})
    files: dict[str, bytes | str] = {"main.py": HELLO_MAIN, "config.yaml": HELLO_CONFIG}
    for i in range(16):
        files[f"part{i}.py"] = f"# part {i}\n" + "x = 1\n" * (8 * MIB // 6)
    folder = write_files(tmp_path / "big", files)

    result = cli.run("submit", str(folder), "--json", "--parallel", "8")

    assert result.code == 0, result.stderr
    body = result.json()
    assert _stored() == sorted(files)  # every file once (no overshoot, no duplicate)
    # In the command's order whatever order they ended in, each sent once by the run.
    assert [f["filename"] for f in body["files"]] == sorted(files)
    assert {f["action"] for f in body["files"]} == {"uploaded"}
    assert [j.pk for j in Job.objects.all()] == [body["job_id"]]
    log = (tmp_path / "web.log").read_text()
    assert re.search(r'"POST /api/submissions/\w+/files/ HTTP/1.1" 503', log)  # it was busy
    assert not re.search(r'" 5\d\d ', log.replace('" 503 ', '"')), log[-3000:]  # only 503s


def _refused(cli: Cli, folder: Path, code: str) -> None:
    result = cli.run("submit", str(folder), "--json", "--parallel", "8", "--skip-local-checks")
    assert result.code != 0, result.stderr
    assert result.json()["code"] == code, result.stdout
    assert "Traceback" not in result.stderr
    assert Job.objects.count() == 0


def _parts(tmp_path: Path, count: int, size: int) -> Path:
    files: dict[str, bytes | str] = {"main.py": HELLO_MAIN, "config.yaml": HELLO_CONFIG}
    for i in range(count):
        files[f"part{i}.py"] = f"# {i}\n".encode() + b"#" * (size - len(f"# {i}\n"))
    return write_files(tmp_path / "parts", files)


def test_more_files_at_once_than_a_submission_holds_stop_at_its_limit(
    cli: Cli, tmp_path: Path, settings: Any
) -> None:
    settings.MAX_FILES_PER_SUBMISSION = 5
    _refused(cli, _parts(tmp_path, 10, 1000), "too_many_files")
    assert SubmissionFile.objects.count() == 5


def test_more_bytes_at_once_than_the_storage_quota_stop_within_it(
    cli: Cli, tmp_path: Path, settings: Any
) -> None:
    settings.QUOTA_MAX_STORAGE_BYTES = 20_000
    folder = _parts(tmp_path, 10, 4000)
    _refused(cli, folder, "storage_quota_exceeded")
    stored = SubmissionFile.objects.all()
    assert sum(f.size for f in stored) <= 20_000
    assert len(stored) == len({f.filename.lower() for f in stored})


@pytest.mark.parametrize("same", [True, False])
def test_names_that_differ_only_by_case_sent_at_once_land_once(
    cli: Cli, tmp_path: Path, same: bool
) -> None:
    folder = write_files(
        tmp_path / "case",
        {
            "config.yaml": HELLO_CONFIG,
            "main.py": HELLO_MAIN,
            "util.py": "A = 1\n",
            "uTIL.py": "A = 1\n" if same else "A = 2\n",
        },
    )
    # config.yaml makes the draft; main.py, uTIL.py and util.py go at once.
    result = cli.run("submit", str(folder), "--json", "--skip-local-checks", "--parallel", "8")

    names = [f.lower() for f in _stored()]
    assert sorted(names) == ["config.yaml", "main.py", "util.py"]  # one of the two, once
    if same:  # the second is the first's content: a safe replay, and the job is made
        assert result.code == 0, result.stderr
        actions = sorted(f["action"] for f in result.json()["files"])
        assert actions == ["replayed", "uploaded", "uploaded", "uploaded"]
        return
    assert result.json()["code"] == "duplicate_filename", result.stdout
    assert Job.objects.count() == 0
