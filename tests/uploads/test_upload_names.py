"""A finished upload's name, given in the body (`filename` of a JSON or form create, of a JSON
attach), is judged by the name rule of a file part's name: a NUL or another control
character, a blank or an overlong name is `invalid_filename` with the same
message on every path, never `invalid_request`; nothing is created and the upload stays
usable (PostgreSQL, which refuses NUL in text, never sees the name)."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.submissions.models import ResumableUpload, Submission, SubmissionFile
from tests.factories.submissions import make_submission
from tests.submissions.conftest import add_file, create_submission, post_multipart
from tests.uploads.requests import send
from tests.uploads.test_attach import finished_upload

pytestmark = pytest.mark.django_db

#: Names a multipart file part can carry too: both paths must answer alike.
CONTROL_NAMES = [
    pytest.param("nul\x00.py", id="nul"),
    pytest.param("bell\x07.py", id="bell"),
    pytest.param("esc\x1b[31m.py", id="escape"),
    pytest.param("del\x7f.py", id="delete"),
    pytest.param("c1\x9b.py", id="c1"),
]
#: Names only a body field can carry.
FIELD_ONLY_NAMES = [
    pytest.param("line\n.py", id="newline"),
    pytest.param("cr\r.py", id="carriage-return"),
    pytest.param("", id="blank"),
    pytest.param("é" * 127 + ".py", id="overlong"),
]


def post_json(client: APIClient, path: str, body: dict[str, Any]) -> Any:
    # json.dumps escapes every control character (\u0000).
    return send(client, "POST", path, json.dumps(body).encode(), content_type="application/json")


def refusal(response: Any) -> tuple[int, str, str]:
    body = response.json()
    return response.status_code, body["code"], body["error"]


def from_upload_refusals(client: APIClient, user: User, upload_id: str, name: str) -> list[Any]:
    """The three ways a finished upload gets a name: JSON create, JSON attach, form create."""
    draft = make_submission(owner=user, files=())
    named = {"upload_id": upload_id, "filename": name}
    answers = [
        post_json(client, "/api/submissions/", {**named, "question_id": "q1"}),
        post_json(client, f"/api/submissions/{draft.pk}/files/", named),
    ]
    answers.append(post_multipart(client, "/api/submissions/", list(named.items())))
    return [refusal(answer) for answer in answers]


def assert_nothing_made(upload_id: str, client: APIClient, *, drafts: int) -> None:
    """Only the empty drafts the test made exist; the upload is unattached and still usable."""
    assert Submission.objects.count() == drafts
    assert not SubmissionFile.objects.exists()
    assert ResumableUpload.objects.get(pk=upload_id).attached_at is None
    usable = post_json(client, "/api/submissions/", {"upload_id": upload_id, "filename": "ok.py"})
    assert usable.status_code == HTTPStatus.CREATED, usable.json()


@pytest.mark.parametrize("name", CONTROL_NAMES)
def test_a_control_character_is_invalid_filename_on_every_path(
    user: User, user_client: APIClient, name: str
) -> None:
    multipart = [
        refusal(create_submission(user_client, files=[(name, b"print(1)\n")])),
        refusal(add_file(user_client, str(make_submission(owner=user, files=()).pk), name, b"1")),
    ]
    upload_id = finished_upload(user_client, b"print(1)\n")

    from_upload = from_upload_refusals(user_client, user, upload_id, name)

    status, code, message = multipart[0]
    assert (status, code) == (HTTPStatus.BAD_REQUEST, "invalid_filename"), message
    assert "control character" in message or "U+" in message
    assert multipart[1] == multipart[0]
    assert from_upload == [multipart[0]] * 3
    assert_nothing_made(upload_id, user_client, drafts=2)


@pytest.mark.parametrize("name", FIELD_ONLY_NAMES)
def test_other_bad_names_in_a_body_field_are_invalid_filename(
    user: User, user_client: APIClient, name: str
) -> None:
    upload_id = finished_upload(user_client, b"print(1)\n")

    answers = from_upload_refusals(user_client, user, upload_id, name)

    assert {(status, code) for status, code, _ in answers} == {
        (HTTPStatus.BAD_REQUEST, "invalid_filename")
    }, answers
    assert len({message for _, _, message in answers}) == 1
    assert_nothing_made(upload_id, user_client, drafts=1)
