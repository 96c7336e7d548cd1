"""Archives built to cost memory or workers: refused by the streaming header check before
`tarfile` or `zipfile` reads what they declare, at upload and in the grader's unpacking."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import tarfile
import zipfile
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from apps.core.archives import MAX_HEADER_FIELD, ArchiveError, check_archive
from tests.factories.archives import tar_header
from tests.submissions.conftest import add_file

pytestmark = pytest.mark.django_db

ROOT = Path(settings.BASE_DIR)


def long_name_bomb(path: Path, declared: int) -> None:
    """One GNU long-name header declaring `declared` bytes of name, then those bytes (zeros,
    which compress to almost nothing), then a member."""
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(tar_header(b"././@LongLink", declared, b"L"))
        zeros = bytes(1024 * 1024)
        left = -(-declared // 512) * 512
        while left > 0:
            out.write(zeros[: min(left, len(zeros))])
            left -= min(left, len(zeros))
        out.write(tar_header(b"x.py", 0, b"0"))
        out.write(bytes(1024))


def many_members_tar(count: int) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for index in range(count):
            info = tarfile.TarInfo(f"m{index}.py")
            archive.addfile(info, io.BytesIO(b""))
    return buffer.getvalue()


def many_members_zip(count: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for index in range(count):
            archive.writestr(f"m{index}.py", b"")
    return buffer.getvalue()


def test_long_name_bomb_is_refused_with_bounded_memory(tmp_path: Path) -> None:
    """A 256 MiB declared name: the check runs in a child process whose peak RSS is measured."""
    bomb = tmp_path / "bomb.tar.gz"
    long_name_bomb(bomb, 256 * 1024 * 1024)
    assert bomb.stat().st_size < 2 * 1024 * 1024
    code = f"""
import json, resource, sys
from pathlib import Path
from apps.core.archives import ArchiveError, check_archive
try:
    check_archive(Path({str(bomb)!r}), "tar.gz", max_members=10000, max_unpacked=2**40)
    outcome = "accepted"
except ArchiveError as exc:
    outcome = exc.kind + ": " + str(exc)
print(json.dumps({{"outcome": outcome,
                  "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}}))
"""
    baseline = subprocess.run(
        [
            sys.executable,
            "-c",
            "import resource, apps.core.archives; "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    report = json.loads(run.stdout)

    assert report["outcome"].startswith("unsafe: The archive has a header field of 268435456")
    # The check holds at most one header field (64 KiB) and gzip's buffers beyond the
    # interpreter itself; tarfile alone would have read the 256 MiB name into memory.
    assert report["rss_kib"] - int(baseline.stdout) < 16 * 1024, report


def test_long_name_bomb_upload_is_unsafe_archive(
    user_client: APIClient, draft: str, tmp_path: Path
) -> None:
    bomb = tmp_path / "bomb.tar.gz"
    long_name_bomb(bomb, 8 * 1024 * 1024)
    response = add_file(user_client, draft, "bomb.tar.gz", bomb.read_bytes())

    assert response.status_code == HTTPStatus.BAD_REQUEST
    body = response.json()
    assert body["code"] == "unsafe_archive"
    assert str(MAX_HEADER_FIELD) in body["error"]


@pytest.mark.parametrize(
    ("filename", "content"),
    [("many.tar.gz", many_members_tar(51)), ("many.zip", many_members_zip(51))],
    # By name: the archives hold the time they were made, and each test's id must be the same in
    # every process that collects it (pytest-xdist's workers).
    ids=["many.tar.gz", "many.zip"],
)
def test_too_many_members_is_unsafe_archive(
    user_client: APIClient, draft: str, settings: Any, filename: str, content: bytes
) -> None:
    settings.MAX_ARCHIVE_MEMBERS = 50
    response = add_file(user_client, draft, filename, content)

    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "unsafe_archive"
    assert "more than 50 members" in response.json()["error"]


def test_fifty_members_pass(user_client: APIClient, draft: str, settings: Any) -> None:
    settings.MAX_ARCHIVE_MEMBERS = 50
    response = add_file(user_client, draft, "ok.tar.gz", many_members_tar(50))

    assert response.status_code in (HTTPStatus.OK, HTTPStatus.CREATED), response.content


@pytest.mark.parametrize("kind", [b"x", b"g", b"K"])
def test_oversized_pax_and_long_link_headers_are_refused(tmp_path: Path, kind: bytes) -> None:
    path = tmp_path / "h.tar.gz"
    with gzip.open(path, "wb") as out:
        out.write(tar_header(b"h", MAX_HEADER_FIELD + 1, kind))
        out.write(bytes(-(-(MAX_HEADER_FIELD + 1) // 512) * 512))
        out.write(bytes(1024))

    with pytest.raises(ArchiveError) as caught:
        check_archive(path, "tar.gz", max_members=10, max_unpacked=10**9)
    assert caught.value.kind == "unsafe"


def test_the_grader_refuses_the_same_bomb(user: Any, tmp_path: Path, settings: Any) -> None:
    """The grader unpacks with the same rules: an archive stored before the rule (or put in
    storage by other means) fails its grading without reading the declared name."""
    from apps.grading.tasks import grade_job
    from apps.submissions.models import SubmissionStatus
    from tests.factories.jobs import make_job
    from tests.factories.submissions import make_stored_submission

    settings.GRADER = "apps.grading.grader.SandboxGrader"
    settings.GRADING_ALLOW_UNSANDBOXED = True
    bomb = tmp_path / "bomb.tar.gz"
    long_name_bomb(bomb, 8 * 1024 * 1024)
    submission = make_stored_submission(
        user, program="print(1)\n", extra_files={"data.tar.gz": bomb.read_bytes()}
    )
    grade_job(make_job(submission).pk)
    submission.refresh_from_db()

    assert submission.status == SubmissionStatus.FAILED
    assert "header field of 8388608 bytes" in submission.status_reason
