"""The grader's unpacking refuses what the upload refuses, reading archives the same way, and
never creates more than MAX_ARCHIVE_MEMBERS files and folders, counting as it writes."""

from __future__ import annotations

import io
import os
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from apps.core.archives import ArchiveError, Budget, unpack_archive
from apps.grading.grader import GradingFile, scratch_prepare
from apps.grading.tasks import grade_job
from apps.submissions.models import Submission, SubmissionStatus
from apps.submissions.selectors import submission_file_list
from tests.factories.archives import (
    lying_zip,
    members_behind_odd_header,
    signed_checksum_tar,
    signed_long_name_bomb,
)
from tests.factories.jobs import make_job
from tests.factories.submissions import make_stored_submission, tar_gz_bytes, zip_bytes

pytestmark = pytest.mark.django_db


def _entries(root: Path) -> int:
    """Files and folders under `root` (not counting `root`)."""
    return sum(len(dirs) + len(files) for _, dirs, files in os.walk(root))


def _files(submission: Submission) -> tuple[GradingFile, ...]:
    return tuple(
        GradingFile(filename=f.filename, storage_name=f.storage_name)
        for f in submission_file_list(submission=submission)
    )


@pytest.fixture
def unsandboxed(settings: Any) -> Any:
    settings.GRADER = "apps.grading.grader.SandboxGrader"
    settings.GRADING_ALLOW_UNSANDBOXED = True
    return settings


@pytest.mark.parametrize(
    ("filename", "build", "reason"),
    [
        ("many.tar.gz", lambda: members_behind_odd_header(200_001), "more than 10000 members"),
        ("bomb.tar.gz", lambda: signed_long_name_bomb(1 << 30), "header field of 1073741824"),
        ("lying.zip", lambda: lying_zip(30_001), "more than 10000 members"),
    ],
    ids=["200k-members-behind-odd-header", "signed-long-name", "lying-zip"],
)
def test_grading_refuses_attack_archives_before_writing_a_member(
    user: User, unsandboxed: Any, tmp_path: Path, filename: str, build: Any, reason: str
) -> None:
    """Stored by other means (or before the rule), the archive fails its grading; preparing
    the folder writes the submitted files and not one member."""
    submission = make_stored_submission(user, program="print(1)\n", extra_files={filename: build()})

    root = tmp_path / "scratch"
    root.mkdir()

    with pytest.raises(ArchiveError) as caught:
        scratch_prepare(_files(submission), root)
    assert reason in str(caught.value)
    assert sorted(p.name for p in root.iterdir()) == sorted(["main.py", "config.yaml", filename])

    grade_job(make_job(submission).pk)
    submission.refresh_from_db()
    assert submission.status == SubmissionStatus.FAILED
    assert reason in submission.status_reason


def test_archives_together_create_at_most_the_member_limit(
    user: User, unsandboxed: Any, tmp_path: Path
) -> None:
    """Each archive passes the per-archive check; together they would create 60 files, and
    the unpacking stops at the limit of 50."""
    unsandboxed.MAX_ARCHIVE_MEMBERS = 50
    first = {f"a{index}.txt": b"a" for index in range(30)}
    second = {f"b{index}.txt": b"b" for index in range(30)}
    submission = make_stored_submission(
        user,
        program="print(1)\n",
        extra_files={"one.tar.gz": tar_gz_bytes(first), "two.zip": zip_bytes(second)},
    )

    root = tmp_path / "scratch"
    root.mkdir()

    with pytest.raises(ArchiveError) as caught:
        scratch_prepare(_files(submission), root)

    assert "more than 50 files and folders" in str(caught.value)
    # The four submitted files, then at most 50 created by unpacking.
    assert _entries(root) == 4 + 50


def test_implicit_folders_count_against_the_limit(tmp_path: Path) -> None:
    """Five members, each 40 folders deep on its own path: 200 folders the archive never
    lists, counted as they are created."""
    members = {"/".join([f"t{tree}", *["d"] * 39, "f.txt"]): b"x" for tree in range(5)}
    archive = tmp_path / "deep.zip"
    archive.write_bytes(zip_bytes(members))
    root = tmp_path / "root"
    root.mkdir()

    with pytest.raises(ArchiveError) as caught:
        unpack_archive(archive, root, budget=Budget(10**6, max_entries=50), max_members=50)

    assert "more than 50 files and folders" in str(caught.value)
    assert _entries(root) == 50


def test_signed_checksum_archive_unpacks(tmp_path: Path) -> None:
    archive = tmp_path / "signed.tar.gz"
    archive.write_bytes(signed_checksum_tar({"a.py": b"print(1)\n", "d/b.txt": b"b" * 700}))
    root = tmp_path / "root"
    root.mkdir()

    unpack_archive(archive, root, budget=Budget(10**6, max_entries=10), max_members=10)

    assert (root / "a.py").read_bytes() == b"print(1)\n"
    assert (root / "d" / "b.txt").read_bytes() == b"b" * 700


def _understated_zip(actual: bytes, declared: int) -> bytes:
    """One deflated member whose headers declare `declared` bytes while its data inflates to
    `actual` (CRC of the declared prefix, so a reader stopping at the declared size is
    satisfied)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("big.bin", actual)
    data = bytearray(buffer.getvalue())
    crc = zlib.crc32(actual[:declared])
    local_at = data.find(b"PK\x03\x04")
    central_at = data.find(b"PK\x01\x02")
    struct.pack_into("<L", data, local_at + 14, crc)
    struct.pack_into("<L", data, local_at + 22, declared)
    struct.pack_into("<L", data, central_at + 16, crc)
    struct.pack_into("<L", data, central_at + 24, declared)
    return bytes(data)


def test_zip_member_inflating_past_its_declared_size_writes_no_more(tmp_path: Path) -> None:
    archive = tmp_path / "liar.zip"
    archive.write_bytes(_understated_zip(b"\0" * (8 * 1024 * 1024), declared=1000))
    root = tmp_path / "root"
    root.mkdir()

    unpack_archive(archive, root, budget=Budget(4096, max_entries=10), max_members=10)

    assert (root / "big.bin").read_bytes() == bytes(1000)


def test_zip_declaring_more_than_the_budget_is_refused_before_writing(tmp_path: Path) -> None:
    archive = tmp_path / "over.zip"
    archive.write_bytes(zip_bytes({"a.bin": b"\0" * 3000, "b.bin": b"\0" * 3000}))
    root = tmp_path / "root"
    root.mkdir()

    with pytest.raises(ArchiveError) as caught:
        unpack_archive(archive, root, budget=Budget(4096, max_entries=10), max_members=10)

    assert caught.value.kind == "unsafe"
    assert "more than 4096 bytes" in str(caught.value)
    assert _entries(root) == 0
