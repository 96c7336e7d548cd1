"""Files at once under attack: a real `yoyaku submit --parallel` against the live server
through the fault proxy (a hostile folder: two large files with the same bytes; kills at any
point; a second process with the same key)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from apps.jobs.models import Job
from apps.submissions.models import SubmissionFile
from tests.client.conftest import HELLO_CONFIG, HELLO_MAIN, Cli, write_files
from tests.client.proxy import FaultProxy

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
