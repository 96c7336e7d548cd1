"""A small bundle whose challenge.yaml inflates far past its limit is refused unread: the web
process never holds what the zip would inflate to (bench/bundle_memory.py measures the same
through a real server: 2 GiB of worker memory for a 1 GiB challenge.yaml before)."""

from __future__ import annotations

import hashlib
import tracemalloc
import zipfile
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from apps.benchmarks.exceptions import InvalidBundle
from apps.benchmarks.models import Challenge
from apps.benchmarks.services.apply import challenge_apply
from apps.benchmarks.services.manifest import MAX_MANIFEST_BYTES
from tests.benchmarks.conftest import Apply

pytestmark = pytest.mark.django_db

INFLATED = 256 * 1024 * 1024
MiB = 1024 * 1024


def _inflating_manifest(path: Path) -> Path:
    line = b"# " + b"x" * 1021 + b"\n"
    block = line * 1024
    with (
        zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive,
        archive.open("challenge.yaml", "w", force_zip64=True) as member,
    ):
        for _ in range(INFLATED // len(block)):
            member.write(block)
    return path


def test_an_inflating_challenge_yaml_is_refused_without_reading_it(
    host: User, apply_as: Callable[[User], Apply], tmp_path: Path
) -> None:
    bundle = _inflating_manifest(tmp_path / "bundle.zip")
    assert bundle.stat().st_size < 2 * MiB
    sha256 = hashlib.sha256(bundle.read_bytes()).hexdigest()

    tracemalloc.start()
    try:
        with pytest.raises(InvalidBundle) as refused:
            challenge_apply(user=host, bundle_path=bundle, sha256=sha256)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * MiB
    assert refused.value.extra["fields"] == {
        "challenge.yaml": [f"must be at most {MAX_MANIFEST_BYTES} bytes"]
    }

    answer = apply_as(host)(bundle.read_bytes())
    assert answer.status_code == HTTPStatus.BAD_REQUEST
    assert answer.json()["code"] == "invalid_bundle"
    assert answer.json()["fields"] == {
        "challenge.yaml": [f"must be at most {MAX_MANIFEST_BYTES} bytes"]
    }
    assert not Challenge.objects.exists()
