"""Hostile bundles are refused with the right code, and nothing is stored or created: path
traversal, a symlink member, a zip bomb, a YAML bomb, a huge YAML, a file that is no zip, a
bundle over MAX_BUNDLE_SIZE."""

from __future__ import annotations

import io
import stat
import time
import zipfile
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from apps.benchmarks.models import Challenge
from apps.benchmarks.services.manifest import MAX_MANIFEST_BYTES, MAX_MANIFEST_DEPTH
from tests.benchmarks.bundles import bundle, example_files
from tests.benchmarks.conftest import Apply

BILLION_LAUGHS = b"""\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
slug: digits
"""


def _nothing_kept() -> None:
    assert not Challenge.objects.exists()
    assert not list((Path(settings.MEDIA_ROOT) / "bundles").rglob("*"))


def _with_member(info: zipfile.ZipInfo, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in example_files().items():
            archive.writestr(name, content)
        archive.writestr(info, data)
    return buffer.getvalue()


def _refused(response: Any, code: str) -> dict[str, Any]:
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.json()
    assert response.json()["code"] == code
    _nothing_kept()
    body: dict[str, Any] = response.json()
    return body


def test_a_member_that_leaves_the_bundle_is_unsafe(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    data = _with_member(zipfile.ZipInfo("data/../../etc/cron.d/evil"), b"* * * * * root sh\n")

    body = _refused(apply_as(host)(data), "unsafe_archive")

    assert "leaves the archive" in body["error"]


def test_a_symlink_member_is_unsafe(host: User, apply_as: Callable[[User], Apply]) -> None:
    link = zipfile.ZipInfo("data/ref/passwd")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16

    body = _refused(apply_as(host)(_with_member(link, b"/etc/passwd")), "unsafe_archive")

    assert "link" in body["error"]


def test_a_zip_bomb_is_refused_from_its_central_directory(
    host: User, apply_as: Callable[[User], Apply], settings: Any
) -> None:
    settings.MAX_BUNDLE_UNPACKED_SIZE = 8 * 1024 * 1024
    bomb = zipfile.ZipInfo("data/public/zeros.bin")
    bomb.compress_type = zipfile.ZIP_DEFLATED
    data = _with_member(bomb, bytes(16 * 1024 * 1024))
    assert len(data) < 100 * 1024

    body = _refused(apply_as(host)(data), "unsafe_archive")

    assert "once unpacked" in body["error"]


def test_a_billion_laughs_manifest_is_refused_quickly(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    started = time.monotonic()

    body = _refused(apply_as(host)(bundle(manifest=BILLION_LAUGHS)), "invalid_bundle")

    assert body["fields"] == {"challenge.yaml": ["must not use anchors or aliases (& and *)"]}
    assert time.monotonic() - started < 5


def test_a_huge_manifest_is_refused_unparsed(host: User, apply_as: Callable[[User], Apply]) -> None:
    huge = b"slug: digits\n" + b"# padding\n" * (MAX_MANIFEST_BYTES // 10 + 1)

    body = _refused(apply_as(host)(bundle(manifest=huge)), "invalid_bundle")

    assert body["fields"] == {"challenge.yaml": [f"must be at most {MAX_MANIFEST_BYTES} bytes"]}


def test_a_deeply_nested_manifest_is_refused_before_it_is_built(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    deep = b"slug: " + b"[" * 5000 + b"]" * 5000 + b"\n"
    started = time.monotonic()

    body = _refused(apply_as(host)(bundle(manifest=deep)), "invalid_bundle")

    assert body["fields"] == {"challenge.yaml": [f"must nest at most {MAX_MANIFEST_DEPTH} levels"]}
    assert time.monotonic() - started < 5


def test_a_manifest_that_is_not_utf8_is_invalid(
    host: User, apply_as: Callable[[User], Apply]
) -> None:
    body = _refused(apply_as(host)(bundle(manifest=b"slug: \xff\xfe\n")), "invalid_bundle")

    assert list(body["fields"]) == ["challenge.yaml"]


@pytest.mark.parametrize(
    "data", [b"", b"not a zip at all", b"PK\x03\x04 truncated", bytes(1024)], ids=str
)
def test_a_file_that_is_not_a_zip_is_invalid(
    host: User, apply_as: Callable[[User], Apply], data: bytes
) -> None:
    body = _refused(apply_as(host)(data), "invalid_bundle")

    assert body["fields"] == {"bundle": ["must be a .zip archive with challenge.yaml at its root"]}


def test_a_bundle_over_max_bundle_size_is_refused(
    host: User, apply_as: Callable[[User], Apply], settings: Any
) -> None:
    data = bundle()
    settings.MAX_BUNDLE_SIZE = len(data) - 1

    body = _refused(apply_as(host)(data), "invalid_bundle")

    assert body["fields"] == {"bundle": [f"must be at most {len(data) - 1} bytes"]}
