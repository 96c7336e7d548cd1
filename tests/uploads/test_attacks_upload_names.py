"""Attacks on resumable uploads through what names them: tus metadata naming paths, carrying
NUL, too many or malformed pairs (the bytes always go to the upload's own key, the metadata's
name is never a file's name); names with path tricks when attaching; a token made for reading
trying to write."""

from __future__ import annotations

import base64
from http import HTTPStatus
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.submissions.models import ResumableUpload, SubmissionFile
from apps.submissions.resumable import store
from tests.factories.submissions import make_submission
from tests.factories.tokens import make_token
from tests.uploads.requests import send
from tests.uploads.test_attacks_uploads import (
    PARTIAL,
    SECRET,
    TUS,
    TUS_TYPE,
    V8,
    _snapshot,
    _start,
    _url,
)

pytestmark = pytest.mark.django_db


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


NUL_NAME = _b64(b"a\x00b.py")
RTL_NAME = _b64("\u202ecod.exe".encode())
NOT_UTF8 = _b64(b"\xff\xfe")


@pytest.mark.parametrize(
    "metadata",
    [
        f"filename {_b64(b'../../../../etc/passwd')},relativePath {_b64(b'/etc/cron.d/x')}",
        f"filename {NUL_NAME},filetype {_b64(b'text/html')}",
        "fi\x00lename " + _b64(b"x.py"),
        f"filename {RTL_NAME},{'k' * 500} {_b64(b'v' * 5000)}",
        f"filename {_b64(b'x')},filename {_b64(b'../y')}",
    ],
)
def test_tus_metadata_never_names_where_the_bytes_go(
    user: User, user_client: APIClient, metadata: str
) -> None:
    created = send(
        user_client,
        "POST",
        "/api/uploads/",
        SECRET,
        content_type=TUS_TYPE,
        headers={**TUS, "Upload-Length": str(len(SECRET)), "Upload-Metadata": metadata},
    )
    assert created.status_code == HTTPStatus.CREATED, created.content
    row = ResumableUpload.objects.get()
    assert row.storage_key == f"uploads/{user.pk}/{row.pk}.part"
    media = Path(settings.MEDIA_ROOT).resolve()
    assert store.local_path(row.storage_key).resolve().parent == media / "uploads" / str(user.pk)
    assert store.local_path(row.storage_key).read_bytes() == SECRET
    for key, value in row.metadata.items():
        assert "\x00" not in key
        assert "\x00" not in value
        assert len(key) <= 100
        assert len(value) <= 1000
    # The metadata's name is never a file's name: attaching takes the name it is given.
    draft = make_submission(owner=user, files=())
    nameless = user_client.post(
        f"/api/submissions/{draft.pk}/files/", {"upload_id": row.pk}, format="json"
    )
    assert nameless.status_code == HTTPStatus.BAD_REQUEST
    assert not SubmissionFile.objects.exists()


@pytest.mark.parametrize(
    "metadata",
    [
        ",".join(f"k{i} {_b64(b'v')}" for i in range(33)),
        f"filename {NOT_UTF8}",  # not UTF-8
        "filename not*base64",
        f"filename {_b64(b'x')} extra",
        f",filename {_b64(b'x')}",  # an empty pair
    ],
)
def test_malformed_tus_metadata_is_refused_without_an_upload(
    user_client: APIClient, metadata: str
) -> None:
    created = send(
        user_client,
        "POST",
        "/api/uploads/",
        headers={**TUS, "Upload-Length": "3", "Upload-Metadata": metadata},
    )
    assert created.status_code == HTTPStatus.BAD_REQUEST, created.content
    assert not ResumableUpload.objects.exists()


@pytest.mark.parametrize(
    "filename",
    [
        "../main.py",
        "a/main.py",
        "..",
        ".",
        "main.py\x00.txt",
        "/etc/main.py",
        "main.py/",
        "\\main.py",
    ],
)
def test_names_with_path_tricks_never_attach(
    user: User, user_client: APIClient, filename: str
) -> None:
    upload_id = _start(user_client, SECRET, complete=True)
    before = _snapshot(upload_id)
    draft = make_submission(owner=user, files=())
    response = user_client.post(
        f"/api/submissions/{draft.pk}/files/",
        {"upload_id": upload_id, "filename": filename},
        format="json",
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert not SubmissionFile.objects.exists()
    assert _snapshot(upload_id) == before


def test_a_read_token_reads_its_uploads_offset_and_changes_nothing(user: User) -> None:
    owner = APIClient()
    owner.force_authenticate(user)
    upload_id = _start(owner, SECRET, complete=False)
    before = _snapshot(upload_id)
    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token(user, scopes=['read'])}")
    assert send(reader, "HEAD", _url(upload_id), headers=TUS).status_code == HTTPStatus.OK
    for method, body, content_type, headers in (
        ("POST", b"x", "application/octet-stream", {"Upload-Complete": "?1", **V8}),
        ("PATCH", b"evil", PARTIAL, {"Upload-Offset": str(len(SECRET)), "Upload-Complete": "?1"}),
        ("PATCH", b"evil", TUS_TYPE, {**TUS, "Upload-Offset": str(len(SECRET))}),
        ("DELETE", b"", "application/octet-stream", TUS),
    ):
        path = "/api/uploads/" if method == "POST" else _url(upload_id)
        response = send(reader, method, path, body, content_type=content_type, headers=headers)
        assert response.status_code == HTTPStatus.FORBIDDEN, (method, response.content)
        assert response.json()["code"] == "insufficient_scope"
    assert _snapshot(upload_id) == before
    assert ResumableUpload.objects.count() == 1
