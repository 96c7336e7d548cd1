"""The pages' resumable uploads authenticate as every page call does: the session cookie and
the CSRF token (`X-CSRFToken`, read from the `csrftoken` cookie). Without the token, or from
another site's origin, a write is refused before any upload exists or any byte is stored;
reading an upload's offset (HEAD) is a safe method and needs none. Another user's upload is
404 to every call of the page's path."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from apps.submissions.models import ResumableUpload, Submission, SubmissionFile
from tests.factories.submissions import make_submission
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db

V8 = {"Upload-Draft-Interop-Version": "8"}
SAME_SITE = "http://testserver"


def signed_in_page(user: User) -> tuple[Client, str]:
    """A signed-in browser after opening /submit/: the client and its CSRF token."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.get("/submit/").status_code == HTTPStatus.OK
    return client, client.cookies["csrftoken"].value


def call(
    client: Client,
    method: str,
    path: str,
    body: bytes = b"",
    content_type: str = "",
    headers: dict[str, str] | None = None,
) -> Any:
    return client.generic(method, path, body, content_type, headers={**V8, **(headers or {})})


def create(client: Client, headers: dict[str, str]) -> Any:
    said = {"Upload-Complete": "?0", "Upload-Length": "6"}
    return call(client, "POST", "/api/uploads/", headers={**said, **headers})


def append(
    client: Client, path: str, data: bytes, offset: int, done: bool, headers: dict[str, str]
) -> Any:
    said = {"Upload-Offset": str(offset), "Upload-Complete": "?1" if done else "?0"}
    return call(
        client, "PATCH", path, data, "application/partial-upload", headers={**said, **headers}
    )


def test_the_page_path_uploads_with_the_login_cookie_and_its_token(user: User) -> None:
    client, token = signed_in_page(user)
    created = create(client, {"X-CSRFToken": token, "Origin": SAME_SITE})
    assert created.status_code == HTTPStatus.CREATED, created.content
    path = f"/api/uploads/{created.json()['upload_id']}/"
    first = append(client, path, b"abc", 0, False, {"X-CSRFToken": token})
    assert first.status_code == HTTPStatus.NO_CONTENT
    head = call(client, "HEAD", path)  # a safe method: no token needed
    assert (head.status_code, head["Upload-Offset"], head["Upload-Complete"]) == (204, "3", "?0")
    last = append(client, path, b"def", 3, True, {"X-CSRFToken": token, "Origin": SAME_SITE})
    assert last.status_code == HTTPStatus.OK
    assert last.json()["complete"] is True


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="no-token"),
        pytest.param({"X-CSRFToken": "x" * 32}, id="wrong-token"),
        pytest.param({"Origin": "https://elsewhere.example"}, id="other-site-no-token"),
        pytest.param({"Origin": "https://elsewhere.example", "token": "yes"}, id="other-site"),
    ],
)
def test_a_cross_site_write_is_refused(user: User, headers: dict[str, str]) -> None:
    client, token = signed_in_page(user)
    if headers.pop("token", None):
        headers["X-CSRFToken"] = token
    created = create(client, {"X-CSRFToken": token})
    path = f"/api/uploads/{created.json()['upload_id']}/"

    refused = [
        create(client, headers),
        append(client, path, b"abc", 0, False, headers),
        call(client, "DELETE", path, headers=headers),
    ]

    for response in refused:
        assert response.status_code == HTTPStatus.FORBIDDEN, response.content
        assert "CSRF" in response.json()["error"]
    assert ResumableUpload.objects.count() == 1
    assert ResumableUpload.objects.get().offset == 0


def test_another_users_upload_is_404_on_the_page_path(user: User) -> None:
    owner_client, owner_token = signed_in_page(make_user(username="owner"))
    created = create(owner_client, {"X-CSRFToken": owner_token})
    upload_id = created.json()["upload_id"]
    path = f"/api/uploads/{upload_id}/"
    done = append(owner_client, path, b"print1", 0, True, {"X-CSRFToken": owner_token})
    assert done.status_code == HTTPStatus.OK

    client, token = signed_in_page(user)
    draft = make_submission(owner=user, files=())
    answers = [
        call(client, "HEAD", path),
        call(client, "GET", path),
        append(client, path, b"x", 6, True, {"X-CSRFToken": token}),
        call(client, "DELETE", path, headers={"X-CSRFToken": token}),
    ]
    body = json.dumps({"upload_id": upload_id, "filename": "main.py"}).encode()
    token_header = {"X-CSRFToken": token}
    answers += [
        call(client, "POST", target, body, "application/json", token_header)
        for target in ("/api/submissions/", f"/api/submissions/{draft.pk}/files/")
    ]

    assert [a.status_code for a in answers] == [HTTPStatus.NOT_FOUND] * len(answers)
    upload = ResumableUpload.objects.get(pk=upload_id)
    assert (upload.offset, upload.attached_at) == (6, None)
    assert list(Submission.objects.all()) == [draft]
    assert not SubmissionFile.objects.exists()
