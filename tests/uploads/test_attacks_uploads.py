"""Attacks on resumable uploads through the API by callers who have read the source: another
user's upload on every door (both protocols' HEAD, GET, PATCH, DELETE, attach, a draft made
from it, a bundle applied from it) must answer exactly as an id that never existed; hostile
`Upload-*` headers (signs, exponents, other digits, lines joined by a proxy, past 15 digits);
lengths and offsets at the edges; a body longer than its `Content-Length`; appends after
completion or attach; empty uploads piled up without end. Each plays the attack and sees it
fail, with the owner's bytes and row unchanged (names and metadata:
`test_attacks_upload_names.py`; races: `test_attacks_upload_races.py`)."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.core.models_utils import new_hex_id
from apps.submissions.models import ResumableUpload, SubmissionFile
from apps.submissions.resumable import store
from tests.benchmarks.bundles import grant_add_challenge
from tests.factories.submissions import make_submission
from tests.uploads.requests import send
from yoyaku_client.errors import QuotaError, error_from_body

pytestmark = pytest.mark.django_db

V8 = {"Upload-Draft-Interop-Version": "8"}
TUS = {"Tus-Resumable": "1.0.0"}
PARTIAL = "application/partial-upload"
TUS_TYPE = "application/offset+octet-stream"
#: The owner's bytes: they must never come back to anyone else.
SECRET = b"owner-only-" + os.urandom(8).hex().encode()

Door = Callable[[APIClient, str], Any]


def _start(client: APIClient, data: bytes, *, complete: bool) -> str:
    response = send(
        client,
        "POST",
        "/api/uploads/",
        data,
        headers={"Upload-Complete": "?1" if complete else "?0", **V8},
    )
    assert response.status_code == HTTPStatus.CREATED, response.content
    return str(response.json()["upload_id"])


def _url(upload_id: str) -> str:
    return f"/api/uploads/{upload_id}/"


def _snapshot(upload_id: str) -> tuple[Any, ...]:
    row = ResumableUpload.objects.get(pk=upload_id)
    path = store.local_path(row.storage_key)
    return (row.offset, row.length, row.complete, row.attached_at, row.sha256, path.read_bytes())


def _doors(user: User) -> dict[str, Door]:
    """Every way to name an upload, as `user` (a host: the bundle door reaches the upload)."""
    draft = make_submission(owner=user, files=())

    def patch(tus: bool) -> Door:
        headers = {**TUS} if tus else {"Upload-Complete": "?1", **V8}
        return lambda c, u: send(
            c,
            "PATCH",
            _url(u),
            b"evil",
            content_type=TUS_TYPE if tus else PARTIAL,
            headers={"Upload-Offset": str(len(SECRET)), **headers},
        )

    return {
        "draft HEAD": lambda c, u: send(c, "HEAD", _url(u), headers=V8),
        "tus HEAD": lambda c, u: send(c, "HEAD", _url(u), headers=TUS),
        "GET": lambda c, u: c.get(_url(u)),
        "draft PATCH": patch(False),
        "tus PATCH": patch(True),
        "draft DELETE": lambda c, u: send(c, "DELETE", _url(u), headers=V8),
        "tus DELETE": lambda c, u: send(c, "DELETE", _url(u), headers=TUS),
        "attach": lambda c, u: c.post(
            f"/api/submissions/{draft.pk}/files/",
            {"upload_id": u, "filename": "main.py"},
            format="json",
        ),
        "new draft": lambda c, u: c.post(
            "/api/submissions/", {"upload_id": u, "filename": "main.py"}, format="json"
        ),
        "bundle apply": lambda c, u: c.post("/api/challenges/", {"upload_id": u}, format="json"),
        "bundle dry run": lambda c, u: c.post(
            "/api/challenges/", {"upload_id": u, "dry_run": True}, format="json"
        ),
    }


def _answer(response: Any, upload_id: str) -> tuple[int, bytes, dict[str, str]]:
    """A response with the id it names blanked: what an attacker can compare."""
    skip = {"date", "content-length", "x-request-id"}
    headers = {
        name.lower(): value.replace(upload_id, "ID")
        for name, value in response.items()
        if name.lower() not in skip
    }
    return response.status_code, response.content.replace(upload_id.encode(), b"ID"), headers


@pytest.mark.parametrize("complete", [False, True])
def test_another_users_upload_answers_on_every_door_exactly_as_one_that_never_existed(
    user_client: APIClient,
    other_user: User,
    client_for: Callable[[User], APIClient],
    complete: bool,
) -> None:
    owned = _start(user_client, SECRET, complete=complete)
    before = _snapshot(owned)
    attacker = grant_add_challenge(other_user)
    client = client_for(attacker)
    for name, door in _doors(attacker).items():
        unknown = new_hex_id()
        foreign = door(client, owned)
        never = door(client, unknown)
        assert foreign.status_code == HTTPStatus.NOT_FOUND, (name, foreign.content)
        assert _answer(foreign, owned) == _answer(never, unknown), name
        assert SECRET not in foreign.content
        assert _snapshot(owned) == before, name
    assert not SubmissionFile.objects.exists()
    # The owner still has it all.
    assert user_client.get(_url(owned)).json()["offset"] == len(SECRET)


HOSTILE_HEADERS = [
    ("Upload-Offset", "-1"),
    ("Upload-Offset", "+" + str(len(SECRET))),
    ("Upload-Offset", f"{len(SECRET)}.0"),
    ("Upload-Offset", "1e1"),
    ("Upload-Offset", "0x1a"),
    ("Upload-Offset", "\uff12\uff17"),  # full-width digits
    ("Upload-Offset", f"{len(SECRET)}, 0"),  # two header lines joined by a proxy
    ("Upload-Offset", f"{len(SECRET)} {len(SECRET)}"),
    ("Upload-Offset", "9" * 16),
    ("Upload-Offset", "9" * 400),
    ("Upload-Offset", ""),
    ("Upload-Length", "-1"),
    ("Upload-Length", "9" * 16),
    ("Upload-Length", "100, 200"),
    ("Upload-Complete", "?1, ?0"),
    ("Upload-Complete", "?2"),
    ("Upload-Complete", "true"),
    ("Upload-Draft-Interop-Version", "8, 7"),
]


@pytest.mark.parametrize(("name", "value"), HOSTILE_HEADERS)
def test_hostile_upload_headers_are_refused_and_append_nothing(
    user_client: APIClient, name: str, value: str
) -> None:
    upload_id = _start(user_client, SECRET, complete=False)
    before = _snapshot(upload_id)
    headers = {"Upload-Offset": str(len(SECRET)), "Upload-Complete": "?1", **V8, name: value}
    response = send(
        user_client, "PATCH", _url(upload_id), b"evil", content_type=PARTIAL, headers=headers
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert response.json()["code"] == "invalid_request"
    assert _snapshot(upload_id) == before


@pytest.mark.parametrize(
    ("name", "value", "status"),
    [
        ("Tus-Resumable", "1.0.0, 1.0.0", HTTPStatus.PRECONDITION_FAILED),
        ("Upload-Checksum", "sha256 " + base64.b64encode(b"x" * 64).decode(), 400),
        ("Upload-Checksum", "md5 " + base64.b64encode(b"x" * 16).decode(), 400),
        ("Upload-Checksum", "sha256 not-base64!", 400),
        ("Upload-Offset", "-0", 400),
    ],
)
def test_hostile_tus_headers_are_refused_and_append_nothing(
    user_client: APIClient, name: str, value: str, status: int
) -> None:
    upload_id = _start(user_client, SECRET, complete=False)
    before = _snapshot(upload_id)
    headers = {**TUS, "Upload-Offset": str(len(SECRET)), name: value}
    response = send(
        user_client, "PATCH", _url(upload_id), b"evil", content_type=TUS_TYPE, headers=headers
    )
    assert response.status_code == status, response.content
    assert _snapshot(upload_id) == before


def test_lengths_and_offsets_at_the_edges(user_client: APIClient, settings: Any) -> None:
    settings.QUOTA_MAX_STORAGE_BYTES = 1024 * 1024
    too_large = settings.MAX_RESUMABLE_UPLOAD_SIZE + 1
    created = send(
        user_client, "POST", "/api/uploads/", headers={**TUS, "Upload-Length": str(too_large)}
    )
    assert created.status_code == HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    over_quota = send(
        user_client,
        "POST",
        "/api/uploads/",
        headers={**TUS, "Upload-Length": str(settings.QUOTA_MAX_STORAGE_BYTES + 1)},
    )
    assert over_quota.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert over_quota.json()["code"] == "storage_quota_exceeded"
    assert not ResumableUpload.objects.exists()

    upload_id = _start(user_client, SECRET, complete=False)
    before = _snapshot(upload_id)
    far = send(
        user_client,
        "PATCH",
        _url(upload_id),
        b"evil",
        content_type=PARTIAL,
        headers={"Upload-Offset": "9" * 15, "Upload-Complete": "?0", **V8},
    )
    assert far.status_code == HTTPStatus.CONFLICT
    assert far.json()["expected-offset"] == len(SECRET)
    late_length = send(
        user_client,
        "PATCH",
        _url(upload_id),
        b"evil",
        content_type=PARTIAL,
        headers={"Upload-Offset": str(len(SECRET)), "Upload-Length": str(too_large), **V8}
        | {"Upload-Complete": "?0"},
    )
    assert late_length.status_code == HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    shorter = send(
        user_client,
        "PATCH",
        _url(upload_id),
        b"evil",
        content_type=PARTIAL,
        headers={"Upload-Offset": str(len(SECRET)), "Upload-Length": "3", "Upload-Complete": "?0"}
        | V8,
    )
    assert shorter.status_code == HTTPStatus.BAD_REQUEST
    assert shorter.json()["code"] == "upload_length_mismatch"
    assert _snapshot(upload_id) == before


def test_only_the_bytes_content_length_declares_are_appended(user_client: APIClient) -> None:
    upload_id = _start(user_client, SECRET, complete=False)
    response = user_client.generic(
        "PATCH",
        _url(upload_id),
        b"0123456789SMUGGLED-NEXT-REQUEST",  # type: ignore[arg-type]
        PARTIAL,
        headers={"Upload-Offset": str(len(SECRET)), "Upload-Complete": "?1", **V8},
        CONTENT_LENGTH="10",
    )
    assert response.status_code == HTTPStatus.OK, response.content
    row = ResumableUpload.objects.get(pk=upload_id)
    assert row.complete
    assert store.local_path(row.storage_key).read_bytes() == SECRET + b"0123456789"
    assert row.sha256 == hashlib.sha256(SECRET + b"0123456789").hexdigest()
    negative = user_client.generic(
        "PATCH",
        _url(_start(user_client, b"", complete=False)),
        b"abc",  # type: ignore[arg-type]
        PARTIAL,
        headers={"Upload-Offset": "0", "Upload-Complete": "?1", **V8},
        CONTENT_LENGTH="-5",
    )
    assert negative.status_code == HTTPStatus.BAD_REQUEST


def test_appends_after_completion_or_attach_change_no_byte(
    user: User, user_client: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    upload_id = _start(user_client, SECRET, complete=True)
    before = _snapshot(upload_id)
    for tus in (False, True):
        response = send(
            user_client,
            "PATCH",
            _url(upload_id),
            b"evil",
            content_type=TUS_TYPE if tus else PARTIAL,
            headers={"Upload-Offset": str(len(SECRET))}
            | (TUS if tus else {"Upload-Complete": "?1", **V8}),
        )
        assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
        assert response.json()["code"] == "upload_completed"
        assert _snapshot(upload_id) == before
    draft = make_submission(owner=user, files=())
    with django_capture_on_commit_callbacks(execute=True):
        attached = user_client.post(
            f"/api/submissions/{draft.pk}/files/",
            {"upload_id": upload_id, "filename": "main.py"},
            format="json",
        )
    assert attached.status_code == HTTPStatus.CREATED
    file = SubmissionFile.objects.get()
    for offset in (len(SECRET), 0):
        again = send(
            user_client,
            "PATCH",
            _url(upload_id),
            b"evil",
            content_type=PARTIAL,
            headers={"Upload-Offset": str(offset), "Upload-Complete": "?1", **V8},
        )
        assert again.status_code == HTTPStatus.BAD_REQUEST
    deleted = send(user_client, "DELETE", _url(upload_id), headers=V8)
    assert deleted.status_code == HTTPStatus.CONFLICT
    assert deleted.json()["code"] == "upload_attached"
    assert store.local_path(file.storage_name).read_bytes() == SECRET


def test_empty_uploads_cannot_pile_up_without_end(user_client: APIClient, settings: Any) -> None:
    settings.UPLOAD_MAX_OPEN_PER_USER = 5
    for _ in range(5):
        _start(user_client, b"", complete=True)
    refused = send(user_client, "POST", "/api/uploads/", headers={"Upload-Complete": "?1", **V8})
    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert refused.json()["code"] == "too_many_uploads"
    # The client takes it as a quota refusal: never retried, exit code 4.
    assert isinstance(error_from_body(refused.status_code, refused.json()), QuotaError)
    tus = send(user_client, "POST", "/api/uploads/", headers={**TUS, "Upload-Length": "1"})
    assert tus.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert ResumableUpload.objects.count() == 5
