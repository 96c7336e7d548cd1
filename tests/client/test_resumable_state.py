"""What the client keeps between runs of a resumable upload, and which files go resumably:
the state file beside `yoyaku submit`'s own (found by server, user, sha256 and size; private;
gone once attached) and the size rules learned from the server's limits."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from yoyaku_client.config import STATE_MAX_AGE, ResumableState, UploadState
from yoyaku_client.submit import LocalFile, LocalRefusal
from yoyaku_client.submit.packing import check_sizes

SERVER = "http://127.0.0.1:8000"
SHA = "ab" * 32


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("YOYAKU_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


def test_a_saved_upload_is_found_again_by_the_same_bytes_only(config_dir: Path) -> None:
    ResumableState.load(SERVER, "alice", SHA, 10).save("u" * 32)

    assert ResumableState.load(SERVER, "alice", SHA, 10).upload_id == "u" * 32
    assert ResumableState.load(SERVER, "alice", SHA, 11).upload_id == ""
    assert ResumableState.load(SERVER, "alice", "cd" * 32, 10).upload_id == ""
    assert ResumableState.load(SERVER, "bob", SHA, 10).upload_id == ""
    assert ResumableState.load("http://other:8000", "alice", SHA, 10).upload_id == ""
    (saved,) = (config_dir / "uploads").glob("resumable-*.json")
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600


def test_forgetting_removes_the_state_and_a_broken_file_reads_as_none(config_dir: Path) -> None:
    state = ResumableState.load(SERVER, "alice", SHA, 10)
    state.save("u" * 32)
    state.forget()
    assert not list((config_dir / "uploads").glob("resumable-*.json"))
    state.forget()  # twice is fine

    state.save("v" * 32)
    state.path.write_text("{not json")
    assert ResumableState.load(SERVER, "alice", SHA, 10).upload_id == ""
    state.path.write_text(json.dumps({"sha256": SHA, "size": 10, "upload_id": None}))
    assert ResumableState.load(SERVER, "alice", SHA, 10).upload_id == ""


def _files(*sizes: int) -> list[LocalFile]:
    return [LocalFile(Path(f"f{i}.py"), f"f{i}.py", size) for i, size in enumerate(sizes)]


def test_files_over_the_limit_go_resumably_up_to_the_resumable_limit() -> None:
    check_sizes(_files(10, 100, 1000), max_size=100, resumable_max=1000)
    with pytest.raises(LocalRefusal) as refused:
        check_sizes(_files(10, 1001), max_size=100, resumable_max=1000)
    assert "for a resumable upload" in refused.value.problems[0]


def test_without_resumable_uploads_the_simple_limit_holds() -> None:
    check_sizes(_files(10, 100), max_size=100, resumable_max=None)
    with pytest.raises(LocalRefusal) as refused:
        check_sizes(_files(10, 101), max_size=100, resumable_max=None)
    assert "more than the limit of 100" in refused.value.problems[0]


def test_a_submission_of_large_files_only_is_not_refused_locally() -> None:
    check_sizes(_files(101, 500), max_size=100, resumable_max=1000)
    with pytest.raises(LocalRefusal) as refused:
        check_sizes(_files(101, 500), max_size=100, resumable_max=None)
    assert len(refused.value.problems) == 2


def test_a_month_old_state_file_goes_at_the_first_save_of_a_run_only(config_dir: Path) -> None:
    folder = config_dir / "uploads"
    folder.mkdir(parents=True)
    old = folder / f"{'0' * 32}.json"
    month_ago = time.time() - STATE_MAX_AGE - 60

    def age() -> None:
        old.write_text("{}\n")
        os.utime(old, (month_ago, month_ago))

    age()
    state = UploadState.load(SERVER, "alice", "key-1")
    state.save()
    assert not old.exists()
    assert state.path.exists()
    age()
    state.save()  # the folder is looked through once per run, not after every file
    assert old.exists()
