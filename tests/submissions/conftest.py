"""Helpers for the submissions tests: hand-built multipart bodies (Django's test client
rewrites file names with basename(), and these tests need the raw names), and uploads."""

from __future__ import annotations

import hashlib
import io
import tarfile
import uuid
import zipfile
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.submissions.incoming import IncomingMaker, incoming_files

FileSpec = tuple[str, str, bytes]  # (field, filename, content)


def multipart(
    fields: Iterable[tuple[str, str]] = (), files: Iterable[FileSpec] = ()
) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    out = io.BytesIO()
    for name, value in fields:
        out.write(f"--{boundary}\r\n".encode())
        out.write(f'Content-Disposition: form-data; name="{name}"\r\n\r\n'.encode())
        out.write(value.encode("utf-8", "surrogatepass"))
        out.write(b"\r\n")
    for field, filename, content in files:
        out.write(f"--{boundary}\r\n".encode())
        disposition = f'Content-Disposition: form-data; name="{field}"; filename="{filename}"'
        out.write(disposition.encode("utf-8", "surrogatepass") + b"\r\n")
        out.write(b"Content-Type: application/octet-stream\r\n\r\n")
        out.write(content)
        out.write(b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


def sha(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def post_multipart(
    client: APIClient,
    url: str,
    fields: Iterable[tuple[str, str]] = (),
    files: Iterable[FileSpec] = (),
    headers: dict[str, str] | None = None,
) -> Any:
    body, content_type = multipart(fields, files)
    return client.generic(
        "POST",
        url,
        body,  # type: ignore[arg-type]
        content_type=content_type,
        headers=headers,
    )


def create_submission(
    client: APIClient,
    files: Iterable[tuple[str, bytes]] = (("main.py", b"print('hi')\n"),),
    fields: Iterable[tuple[str, str]] = (),
    headers: dict[str, str] | None = None,
) -> Any:
    return post_multipart(
        client,
        "/api/submissions/",
        fields,
        [("files", name, content) for name, content in files],
        headers,
    )


def add_file(
    client: APIClient,
    submission_id: str,
    name: str,
    content: bytes,
    headers: dict[str, str] | None = None,
) -> Any:
    return post_multipart(
        client,
        f"/api/submissions/{submission_id}/files/",
        files=[("file", name, content)],
        headers=headers,
    )


def make_zip(members: dict[str, bytes], symlink: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
        if symlink is not None:
            info = zipfile.ZipInfo(symlink)
            info.external_attr = 0o120777 << 16
            archive.writestr(info, "/etc/passwd")
    return buffer.getvalue()


def make_tar_gz(members: Iterable[tarfile.TarInfo | tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                archive.addfile(member)
            else:
                name, content = member
                info = tarfile.TarInfo(name)
                info.size = len(content)
                archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


@pytest.fixture
def draft(user_client: APIClient) -> str:
    """A draft submission of alice's holding main.py."""
    response = create_submission(user_client)
    assert response.status_code == 201, response.content
    return str(response.json()["submission_id"])


@pytest.fixture
def stored_names() -> Callable[[], list[str]]:
    """Every object under submissions/ in the default storage."""
    from django.core.files.storage import storages

    def walk() -> list[str]:
        storage = storages["default"]
        found: list[str] = []

        def visit(prefix: str) -> None:
            if not storage.exists(prefix) and prefix:
                return
            dirs, files = storage.listdir(prefix)
            found.extend(f"{prefix}/{name}" if prefix else name for name in files)
            for sub in dirs:
                visit(f"{prefix}/{sub}" if prefix else sub)

        try:
            visit("submissions")
        except FileNotFoundError:
            return []
        return sorted(found)

    return walk


@pytest.fixture
def incoming() -> Iterator[IncomingMaker]:
    """Build received uploads for service-level tests (closed after the test)."""
    with incoming_files() as make:
        yield make
