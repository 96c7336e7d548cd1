"""Archives whose headers an older scanner read differently from the unpacker: a header with
a signed checksum in front of a 1 GiB GNU long name or of 200,000 members, a zip whose end
record understates its members. Through the real upload API each is a 400 `unsafe_archive`
within 5 s; the same check run alone in a child process keeps its peak RSS bounded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from tests.factories.archives import (
    lying_zip,
    members_behind_odd_header,
    pax_tar,
    signed_checksum_tar,
    signed_long_name_bomb,
)
from tests.submissions.conftest import add_file

pytestmark = pytest.mark.django_db

ROOT = Path(settings.BASE_DIR)
SECONDS = 5.0
# The check holds one header field (64 KiB), one member and the readers' buffers; the
# unpatched parse of these archives grew by gigabytes.
RSS_GROWTH_KIB = 48 * 1024

ATTACKS: dict[str, tuple[str, Callable[[], bytes], str]] = {
    "signed-checksum-long-name-1GiB": (
        "bomb.tar.gz",
        lambda: signed_long_name_bomb(1 << 30),
        "header field of 1073741824 bytes",
    ),
    "200k-members-behind-odd-header": (
        "many.tar.gz",
        lambda: members_behind_odd_header(200_001),
        "more than 10000 members",
    ),
    "zip-end-record-says-1-of-30001": (
        "lying.zip",
        lambda: lying_zip(30_001, declared=1),
        "more than 10000 members",
    ),
}

_CHILD = """
import json, resource, sys, time
from pathlib import Path

import django

django.setup()
from apps.core.exceptions import DomainError
from apps.submissions.validation import validate_archive

before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.monotonic()
try:
    validate_archive(path=Path(sys.argv[1]), filename=sys.argv[2])
    code = "accepted"
except DomainError as exc:
    code = exc.code
print(json.dumps({
    "code": code,
    "seconds": time.monotonic() - start,
    "growth_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before,
}))
"""


def upload_check_in_child(path: Path, filename: str) -> dict[str, Any]:
    """The upload's archive check (`validate_archive`) in a fresh interpreter: its code, its
    time and how far its peak RSS rose above the imported-and-ready baseline."""
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.test_settings"}
    run = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), filename],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    report: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return report


@pytest.fixture(scope="module")
def attacks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, Path, str]]:
    folder = tmp_path_factory.mktemp("attacks")
    built: dict[str, tuple[str, Path, str]] = {}
    for key, (filename, build, reason) in ATTACKS.items():
        path = folder / filename
        path.write_bytes(build())
        built[key] = (filename, path, reason)
    return built


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_attack_upload_is_unsafe_archive_within_five_seconds(
    user_client: APIClient, draft: str, attacks: dict[str, tuple[str, Path, str]], attack: str
) -> None:
    filename, path, reason = attacks[attack]
    content = path.read_bytes()
    assert len(content) < 3 * 1024 * 1024

    start = time.monotonic()
    response = add_file(user_client, draft, filename, content)
    elapsed = time.monotonic() - start

    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    body = response.json()
    assert body["success"] is False
    assert body["code"] == "unsafe_archive"
    assert reason in body["error"]
    assert elapsed < SECONDS
    listed = user_client.get(f"/api/submissions/{draft}/")
    assert filename not in {file["filename"] for file in listed.json()["files"]}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_attack_check_keeps_memory_bounded(
    attacks: dict[str, tuple[str, Path, str]], attack: str
) -> None:
    filename, path, _ = attacks[attack]

    report = upload_check_in_child(path, filename)

    assert report["code"] == "unsafe_archive", report
    assert report["seconds"] < SECONDS, report
    assert report["growth_kib"] < RSS_GROWTH_KIB, report


def test_lying_zip_under_the_member_limit_is_unsafe(user_client: APIClient, draft: str) -> None:
    response = add_file(user_client, draft, "few.zip", lying_zip(51, declared=1))

    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "unsafe_archive"
    assert "declares 1 members but its central directory holds 51" in response.json()["error"]


def test_members_behind_odd_header_over_a_lowered_limit_are_counted(
    user_client: APIClient, draft: str, settings: Any
) -> None:
    settings.MAX_ARCHIVE_MEMBERS = 50
    response = add_file(user_client, draft, "odd.tar.gz", members_behind_odd_header(51))

    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "unsafe_archive"
    assert "more than 50 members" in response.json()["error"]


@pytest.mark.parametrize(
    ("filename", "build"),
    [
        (
            "signed.tar.gz",
            lambda: signed_checksum_tar({"a.py": b"print(1)\n", "data/b.txt": b"x" * 3000}),
        ),
        (
            "pax.tar.gz",
            lambda: pax_tar({"d/" + "é" * 120 + ".py": b"print(2)\n", "c.txt": b"c"}),
        ),
        ("fifty.zip", lambda: lying_zip(50, declared=50)),
    ],
    ids=["signed-checksum-sane-sizes", "pax-normal-sizes", "honest-zip"],
)
def test_legitimate_archives_are_accepted(
    user_client: APIClient, draft: str, filename: str, build: Callable[[], bytes]
) -> None:
    response = add_file(user_client, draft, filename, build())

    assert response.status_code in (HTTPStatus.OK, HTTPStatus.CREATED), response.content
