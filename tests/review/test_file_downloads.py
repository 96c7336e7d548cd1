"""Downloads: the stored bytes exactly, streamed, always as an attachment — an uploaded page
or image is never rendered in the platform's origin, and no stored name can forge a header."""

from __future__ import annotations

import hashlib
import os
import re
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

import pytest
from django.contrib.auth.models import User
from django.core.files.storage import default_storage
from rest_framework.test import APIClient

from apps.core.api.downloads import content_disposition
from apps.submissions.models import Submission, SubmissionFile
from tests.factories.submissions import add_file, make_submission, zip_bytes
from tests.submissions.conftest import create_submission

pytestmark = pytest.mark.django_db


def download(client: APIClient, file: SubmissionFile) -> tuple[Any, bytes]:
    url = f"/api/submissions/{file.submission_id}/files/{file.pk}/download/"
    response: Any = client.get(url)
    assert response.status_code == HTTPStatus.OK, response
    return response, b"".join(response.streaming_content)


def uploaded(client: APIClient, name: str, content: bytes) -> SubmissionFile:
    response = create_submission(client, files=[(name, content)])
    assert response.status_code == HTTPStatus.CREATED, response.json()
    return SubmissionFile.objects.get(submission_id=response.json()["submission_id"])


@pytest.fixture
def more_extensions(settings: Any) -> None:
    settings.ALLOWED_UPLOAD_EXTENSIONS = [".py", ".zip", ".bin", ".html", ".svg"]


def test_a_5_mb_binary_uploaded_comes_back_byte_for_byte(
    user_client: APIClient, more_extensions: None
) -> None:
    content = os.urandom(5 * 1024 * 1024)
    file = uploaded(user_client, "weights.bin", content)

    response, body = download(user_client, file)

    assert body == content
    assert int(response["Content-Length"]) == len(content)
    assert response["ETag"] == f'"{hashlib.sha256(content).hexdigest()}"'
    assert response["Cache-Control"] == "private, no-store"


def test_a_zip_comes_back_byte_for_byte(user_client: APIClient) -> None:
    content = zip_bytes({"answers/a.txt": b"1\n", "answers/b.txt": os.urandom(4096)})
    file = uploaded(user_client, "answers.zip", content)

    response, body = download(user_client, file)

    assert body == content
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"] == (
        "attachment; filename=\"answers.zip\"; filename*=UTF-8''answers.zip"
    )


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("page.html", b"<script>fetch('/api/tokens/')</script>"),
        ("logo.svg", b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'),
    ],
)
def test_an_uploaded_page_or_image_is_an_attachment_never_rendered(
    user_client: APIClient, more_extensions: None, name: str, content: bytes
) -> None:
    file = uploaded(user_client, name, content)

    response, body = download(user_client, file)

    assert body == content
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"].startswith("attachment;")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in response["Content-Security-Policy"]


HOSTILE_NAMES = [
    'x"; filename="evil.html',
    "a\r\nSet-Cookie: sessionid=stolen\r\nX: y.py",
    "résumé 予約.py",
    "back\\slash;.py",
    "\u202egnp.py",
    "..",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_hostile_stored_name_cannot_forge_a_header(
    user: User, user_client: APIClient, name: str
) -> None:
    # The upload refuses most of these names; a row written some other way (an older rule, an
    # operator, a restored backup) is the worst case the header must still survive.
    submission: Submission = make_submission(owner=user, files=())
    file = add_file(submission, "stored.py", b"print(1)\n")
    SubmissionFile.objects.filter(pk=file.pk).update(filename=name)

    response, _ = download(user_client, file)

    header = response["Content-Disposition"]
    assert not any(ch in header for ch in "\r\n\x00")
    assert "Set-Cookie" not in response
    match = re.fullmatch(
        r"attachment; filename=\"([A-Za-z0-9._+-]+)\"; filename\*=UTF-8''(\S+)", header
    )
    assert match is not None, header
    assert unquote(match.group(2)) == name


def test_content_disposition_keeps_a_readable_ascii_fallback() -> None:
    assert content_disposition("résumé.py").startswith('attachment; filename="resume.py"')
    assert content_disposition("予約.py").startswith('attachment; filename="download.py"')
    assert content_disposition("予約").startswith('attachment; filename="download"')


def test_a_file_whose_bytes_left_storage_is_a_json_404(user: User, user_client: APIClient) -> None:
    submission: Submission = make_submission(owner=user, files=())
    file = add_file(submission, "gone.py", b"print(1)\n")
    default_storage.delete(file.storage_name)
    response = user_client.get(f"/api/submissions/{submission.pk}/files/{file.pk}/download/")
    assert response.status_code == HTTPStatus.NOT_FOUND
    assert response.json()["code"] == "not_found"


def test_the_file_admin_links_each_file_to_its_download_for_staff(
    user: User, staff_user: User
) -> None:
    from django.test import Client as BrowserClient

    submission: Submission = make_submission(owner=user, files=())
    file = add_file(submission, "page.py", b"print(1)\n")
    browser = BrowserClient()
    browser.force_login(staff_user)

    page = browser.get(f"/admin/submissions/submissionfile/{file.pk}/change/")
    url = f"/api/submissions/{submission.pk}/files/{file.pk}/download/"
    assert page.status_code == HTTPStatus.OK
    assert f'href="{url}"' in page.content.decode()
    response: Any = browser.get(url)
    assert b"".join(response.streaming_content) == b"print(1)\n"
