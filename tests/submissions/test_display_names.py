"""File names that would be shown as something they are not: bidirectional controls
(`…gnp.py` shown as `…py.png`), zero-width and other format characters, look-alikes of `/`
and `\\`, names that NFKC turns into a path. Each is sent as an attacker would, through the
API, and refused with `invalid_filename`; real names in any script still pass."""

from __future__ import annotations

import http.client
import io
import json
import tarfile
import uuid
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.core.archives import UNSAFE, ArchiveError, Budget, member_problem, unpack_archive
from apps.core.validation import name_display_problem
from apps.submissions.models import Submission, SubmissionFile
from tests.factories.tokens import make_token
from tests.submissions.conftest import (
    add_file,
    create_submission,
    make_tar_gz,
    make_zip,
    post_multipart,
)

pytestmark = pytest.mark.django_db

Walk = Callable[[], list[str]]

# (name sent, what the message must name)
ATTACK_NAMES = [
    pytest.param("invoice\u202egnp.py", "U+202E", id="right-to-left-override"),
    pytest.param("report\u202bcod.py", "U+202B", id="right-to-left-embedding"),
    pytest.param("main\u2067yp.x\u2069.py", "U+2067", id="right-to-left-isolate"),
    pytest.param("main\u200f.py", "U+200F", id="right-to-left-mark"),
    pytest.param("ma\u200bin.py", "U+200B", id="zero-width-space"),
    pytest.param("ma\u200din.py", "U+200D", id="zero-width-joiner"),
    pytest.param("\ufeffmain.py", "U+FEFF", id="byte-order-mark"),
    pytest.param("ma\u00adin.py", "U+00AD", id="soft-hyphen"),
    pytest.param("main\u2028.py", "U+2028", id="line-separator"),
    pytest.param("etc\uff0fpasswd.py", "U+FF0F", id="fullwidth-solidus"),
    pytest.param("etc\uff3cpasswd.py", "U+FF3C", id="fullwidth-reverse-solidus"),
    pytest.param("etc\u2215passwd.py", "U+2215", id="division-slash"),
    pytest.param("etc\u2044passwd.py", "U+2044", id="fraction-slash"),
    pytest.param("etc\u29f8passwd.py", "U+29F8", id="big-solidus"),
    pytest.param("etc\ufe68passwd.py", "U+FE68", id="small-reverse-solidus"),
    pytest.param("\u2025\uff0fmain.py", "U+FF0F", id="two-dot-leader-and-solidus"),
    pytest.param("x\u2025main.py", "'x..main.py'", id="nfkc-two-dot-leader"),
    pytest.param("\uff0e\uff0e.py", "'...py'", id="nfkc-fullwidth-dots"),
    pytest.param("main\x1b[2J.py", "U+001B", id="escape"),
    pytest.param("main\x9b31m.py", "U+009B", id="c1-csi"),
    pytest.param("main\x7f.py", "U+007F", id="delete"),
]
LEGIT_NAMES = ["résumé.py", "データ.py", "naïve_Ελληνικά.py", "Straße.yaml", "e\u0301t\u00e9.py"]


def assert_invalid_filename(response: Any, names: str) -> None:
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    body = response.json()
    assert body["success"] is False
    assert body["code"] == "invalid_filename", body
    assert names in body["error"], body["error"]


@pytest.mark.parametrize(("name", "named"), ATTACK_NAMES)
def test_create_refuses_a_disguised_file_name(
    user_client: APIClient, stored_names: Walk, name: str, named: str
) -> None:
    response = create_submission(user_client, files=[(name, b"print('x')\n")])

    assert_invalid_filename(response, named)
    assert Submission.objects.count() == 0
    assert stored_names() == []


@pytest.mark.parametrize(("name", "named"), ATTACK_NAMES)
def test_adding_a_disguised_file_name_to_a_draft_is_refused(
    user_client: APIClient, draft: str, stored_names: Walk, name: str, named: str
) -> None:
    before = stored_names()

    response = add_file(user_client, draft, name, b"print('x')\n")

    assert_invalid_filename(response, named)
    assert list(SubmissionFile.objects.values_list("filename", flat=True)) == ["main.py"]
    assert stored_names() == before


def test_one_disguised_name_among_several_files_refuses_the_whole_request(
    user_client: APIClient, stored_names: Walk
) -> None:
    files = [("main.py", b"1"), ("config.yaml", b"a: 1"), ("data\u202egnp.py", b"2")]

    response = create_submission(user_client, files=files)

    assert_invalid_filename(response, "U+202E")
    assert Submission.objects.count() == 0
    assert stored_names() == []


def test_a_disguised_name_sent_as_an_rfc_5987_filename_is_refused(
    user_client: APIClient,
) -> None:
    """`filename*=UTF-8''…` carries the name percent-encoded: the rule judges the decoded
    name."""
    boundary = uuid.uuid4().hex
    encoded = quote("invoice\u202egnp.py")
    body = (
        f"--{boundary}\r\n"
        "Content-Disposition: form-data; name=\"files\"; filename*=UTF-8''"
        f"{encoded}\r\n"
        "Content-Type: application/octet-stream\r\n\r\n"
        "print('x')\n\r\n"
        f"--{boundary}--\r\n"
    ).encode()

    response = user_client.generic(
        "POST",
        "/api/submissions/",
        body,  # type: ignore[arg-type]
        content_type=f"multipart/form-data; boundary={boundary}",
    )

    assert_invalid_filename(response, "U+202E")
    assert Submission.objects.count() == 0


@pytest.mark.parametrize("name", LEGIT_NAMES)
def test_names_in_any_script_are_still_accepted(user_client: APIClient, name: str) -> None:
    response = create_submission(user_client, files=[(name, b"print('x')\n")])

    assert response.status_code == HTTPStatus.CREATED, response.content
    assert [f["filename"] for f in response.json()["files"]] == [name]


def test_a_csv_named_in_japanese_is_accepted_where_csv_is_allowed(
    user_client: APIClient, settings: Any
) -> None:
    settings.ALLOWED_UPLOAD_EXTENSIONS = [*settings.ALLOWED_UPLOAD_EXTENSIONS, ".csv"]

    response = create_submission(user_client, files=[("データ.csv", b"a,b\n1,2\n")])

    assert response.status_code == HTTPStatus.CREATED, response.content
    assert response.json()["files"][0]["filename"] == "データ.csv"


@pytest.mark.parametrize("field", ["entrypoint", "config_file"])
def test_a_disguised_entrypoint_or_config_file_name_is_refused(
    user_client: APIClient, field: str
) -> None:
    response = create_submission(user_client, fields=[(field, "run\u202eyp.py")])

    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    body = response.json()
    assert body["code"] == "invalid_request"
    assert "U+202E" in body["fields"][field][0]
    assert Submission.objects.count() == 0


# --- archive members ---------------------------------------------------------------------------

MEMBER_ATTACKS = [
    pytest.param("src/invoice\u202egnp.py", id="right-to-left-override"),
    pytest.param("src/ma\u200bin.py", id="zero-width-space"),
    pytest.param("etc\uff0fpasswd", id="fullwidth-solidus"),
    pytest.param("etc\u2215passwd", id="division-slash"),
    pytest.param("src/\uff0e\uff0e/up.py", id="nfkc-dot-dot-part"),
    pytest.param("src/x\u2025y.py", id="nfkc-two-dot-leader"),
    pytest.param("src/evil\x1b]0;title\x07.py", id="escape-and-bell"),
    pytest.param("src/line\nbreak.py", id="newline"),
]


def _tar_gz_with(name: str) -> bytes:
    return make_tar_gz([("ok.py", b"1"), (name, b"2")])


@pytest.mark.parametrize("name", MEMBER_ATTACKS)
@pytest.mark.parametrize(
    ("archive_name", "build"),
    [
        ("data.zip", lambda name: make_zip({"ok.py": b"1", name: b"2"})),
        ("data.tar.gz", _tar_gz_with),
    ],
    ids=["zip", "tar.gz"],
)
def test_an_archive_with_a_disguised_member_name_is_unsafe(
    user_client: APIClient,
    stored_names: Walk,
    name: str,
    archive_name: str,
    build: Callable[[str], bytes],
) -> None:
    response = create_submission(
        user_client, files=[("main.py", b"1"), (archive_name, build(name))]
    )

    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    body = response.json()
    assert body["code"] == "unsafe_archive", body
    assert body["member"] == name
    assert Submission.objects.count() == 0
    assert stored_names() == []


def test_an_archive_with_members_in_any_script_is_accepted(user_client: APIClient) -> None:
    archive = make_tar_gz([("データ/résumé.py", b"1"), ("x..y/naïve.py", b"2")])

    response = create_submission(user_client, files=[("main.py", b"1"), ("data.tar.gz", archive)])

    assert response.status_code == HTTPStatus.CREATED, response.content


def test_the_member_rule_is_the_file_name_rule_part_by_part() -> None:
    assert member_problem("src/ok.py") is None
    assert member_problem("a/b\\c.py") is None  # separators of a path, judged elsewhere
    for name in ("a\u202e.py", "a\u2215b", "a/\uff0e\uff0e/b"):
        problem = member_problem(name)
        assert problem is not None
        assert problem.startswith("a member name with ")
    # A file name may hold neither separator, nor `..` in any spelling.
    assert name_display_problem("x..y.py") is not None
    assert name_display_problem("x\u2025y.py") is not None


@pytest.mark.parametrize("name", MEMBER_ATTACKS)
def test_the_grader_unpacks_nothing_of_an_archive_with_a_disguised_member(
    name: str, tmp_path: Path
) -> None:
    """An archive stored before this rule existed is refused again when the grader unpacks it."""
    archive = tmp_path / "data.tar.gz"
    archive.write_bytes(_tar_gz_with(name))
    root = tmp_path / "scratch"
    root.mkdir()

    with pytest.raises(ArchiveError) as caught:
        unpack_archive(archive, root, budget=Budget(10**6, max_entries=50), max_members=50)

    assert caught.value.kind == UNSAFE
    assert caught.value.member == name
    assert list(root.iterdir()) == []


# --- over a real socket ------------------------------------------------------------------------


def _raw_upload(base_url: str, token: str, filename: bytes) -> tuple[int, dict[str, Any]]:
    """POST /api/submissions/ with the file name's bytes written into the request as they are."""
    address = urlsplit(base_url)
    boundary = uuid.uuid4().hex.encode()
    body = io.BytesIO()
    body.write(b"--" + boundary + b"\r\n")
    body.write(b'Content-Disposition: form-data; name="files"; filename="' + filename + b'"\r\n')
    body.write(b"Content-Type: application/octet-stream\r\n\r\nprint('x')\n\r\n")
    body.write(b"--" + boundary + b"--\r\n")
    payload = body.getvalue()
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=30)
    try:
        connection.putrequest("POST", "/api/submissions/")
        connection.putheader("Authorization", f"Bearer {token}")
        connection.putheader("Content-Type", f"multipart/form-data; boundary={boundary.decode()}")
        connection.putheader("Content-Length", str(len(payload)))
        connection.endheaders(payload)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_disguised_names_sent_over_a_socket_are_refused_and_real_ones_accepted(
    user: User, live_server: Any
) -> None:
    token = make_token(user)
    for raw, named in [
        ("invoice\u202egnp.py".encode(), "U+202E"),
        ("ma\u200bin.py".encode(), "U+200B"),
        ("etc\uff0fpasswd.py".encode(), "U+FF0F"),
        ("etc\u2215passwd.py".encode(), "U+2215"),
    ]:
        status, body = _raw_upload(live_server.url, token, raw)
        assert (status, body["code"]) == (HTTPStatus.BAD_REQUEST, "invalid_filename"), body
        assert named in body["error"]
    assert Submission.objects.count() == 0

    status, body = _raw_upload(live_server.url, token, "résumé.py".encode())
    assert status == HTTPStatus.CREATED, body
    assert body["files"][0]["filename"] == "résumé.py"


def test_a_tar_member_header_cannot_smuggle_a_name_past_the_rule(user_client: APIClient) -> None:
    """A pax header carries the name in UTF-8 whatever the tar format: the rule sees the name
    `tarfile` will use."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as archive:
        info = tarfile.TarInfo("plain.py")
        info.pax_headers = {"path": "src/invoice\u202egnp.py"}
        info.size = 1
        archive.addfile(info, io.BytesIO(b"1"))

    response = post_multipart(
        user_client,
        "/api/submissions/",
        files=[("files", "main.py", b"1"), ("files", "data.tar.gz", buffer.getvalue())],
    )

    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    assert response.json()["code"] == "unsafe_archive"
