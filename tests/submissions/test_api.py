"""The submissions API through HTTP (Django's test client): bodies, rules and error codes."""

from __future__ import annotations

import tarfile
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.submissions.models import Submission, SubmissionFile, SubmissionStatus
from apps.submissions.services.transitions import submission_transition
from tests.submissions.conftest import (
    add_file,
    create_submission,
    make_tar_gz,
    make_zip,
    post_multipart,
    sha,
)

pytestmark = pytest.mark.django_db

Walk = Callable[[], list[str]]


def assert_error(response: Any, status: HTTPStatus, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["success"] is False
    assert body["code"] == code, body
    assert body["error"]
    return dict(body)


# --- POST /api/submissions/ ------------------------------------------------------------------


def test_create_with_first_file_answers_draft_with_its_file(
    user_client: APIClient, user: Any
) -> None:
    response = create_submission(
        user_client,
        fields=[
            ("metadata", '{"method": "padim"}'),
            ("question_id", "q1"),
            ("skill", "vision"),
            ("entrypoint", "run.py"),
            ("config_file", "conf.yaml"),
        ],
    )
    assert response.status_code == HTTPStatus.CREATED
    body = response.json()
    assert len(body["submission_id"]) == 32
    assert body["user_id"] == user.pk
    assert body["status"] == "draft"
    assert body["metadata"] == {"method": "padim"}
    assert (body["question_id"], body["skill"]) == ("q1", "vision")
    assert (body["entrypoint"], body["config_file"]) == ("run.py", "conf.yaml")
    [file] = body["files"]
    assert file["filename"] == "main.py"
    assert file["size"] == len(b"print('hi')\n")
    assert file["sha256"] == sha(b"print('hi')\n")
    assert file["uploaded_at"].endswith("Z") or "+" in file["uploaded_at"]


def test_create_defaults_entrypoint_and_config_file(user_client: APIClient) -> None:
    body = create_submission(user_client).json()
    assert (body["entrypoint"], body["config_file"], body["metadata"]) == (
        "main.py",
        "config.yaml",
        {},
    )


def test_bulk_create_stores_every_file_in_order(user_client: APIClient, stored_names: Walk) -> None:
    files = [("main.py", b"1"), ("config.yaml", b"a: 1"), ("data.zip", make_zip({"a.txt": b"x"}))]
    response = create_submission(user_client, files=files)
    assert response.status_code == HTTPStatus.CREATED
    assert [f["filename"] for f in response.json()["files"]] == [
        "main.py",
        "config.yaml",
        "data.zip",
    ]
    assert len(stored_names()) == 3


def test_create_without_files_is_invalid_request(user_client: APIClient) -> None:
    response = create_submission(user_client, files=[])
    body = assert_error(response, HTTPStatus.BAD_REQUEST, "invalid_request")
    assert "files" in body["fields"]
    assert Submission.objects.count() == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("metadata", "{not json"),
        ("metadata", "[1, 2]"),
        ("metadata", '{"a": "nul\\u0000"}'),
        ("question_id", "q\x00"),
        ("skill", "s\x00"),
        ("entrypoint", "../main.py"),
        ("config_file", "conf/x.yaml"),
        ("entrypoint", "m\x00.py"),
    ],
)
def test_create_refuses_bad_fields(
    user_client: APIClient, field: str, value: str, stored_names: Walk
) -> None:
    response = create_submission(user_client, fields=[(field, value)])
    body = assert_error(response, HTTPStatus.BAD_REQUEST, "invalid_request")
    assert field in body["fields"]
    assert Submission.objects.count() == 0
    assert stored_names() == []


def test_create_refuses_two_files_of_one_name_case_insensitively(
    user_client: APIClient, stored_names: Walk
) -> None:
    response = create_submission(user_client, files=[("main.py", b"1"), ("MAIN.py", b"2")])
    assert_error(response, HTTPStatus.BAD_REQUEST, "duplicate_filename")
    assert Submission.objects.count() == 0
    assert stored_names() == []


def test_create_refuses_more_files_than_the_limit(
    user_client: APIClient, settings: Any, stored_names: Walk
) -> None:
    settings.MAX_FILES_PER_SUBMISSION = 2
    files = [(f"f{i}.py", b"x") for i in range(3)]
    assert_error(
        create_submission(user_client, files=files), HTTPStatus.BAD_REQUEST, "too_many_files"
    )
    assert Submission.objects.count() == 0
    assert stored_names() == []


def test_create_keeps_nothing_when_a_later_file_is_refused(
    user_client: APIClient, stored_names: Walk
) -> None:
    files = [("main.py", b"1"), ("bad.zip", b"not a zip")]
    assert_error(
        create_submission(user_client, files=files), HTTPStatus.BAD_REQUEST, "invalid_archive"
    )
    assert Submission.objects.count() == 0
    assert SubmissionFile.objects.count() == 0
    assert stored_names() == []


def test_create_checks_the_checksum_of_a_single_file(user_client: APIClient) -> None:
    ok = create_submission(user_client, headers={"X-Content-SHA256": sha(b"print('hi')\n").upper()})
    assert ok.status_code == HTTPStatus.CREATED
    bad = create_submission(user_client, headers={"X-Content-SHA256": sha(b"other")})
    assert_error(bad, HTTPStatus.BAD_REQUEST, "checksum_mismatch")
    assert Submission.objects.count() == 1


def test_create_requires_authentication(api_client: APIClient) -> None:
    assert_error(create_submission(api_client), HTTPStatus.UNAUTHORIZED, "not_authenticated")


def test_create_refuses_a_json_body_without_an_upload(user_client: APIClient) -> None:
    response = user_client.post("/api/submissions/", {"files": []}, format="json")
    body = assert_error(response, HTTPStatus.BAD_REQUEST, "invalid_request")
    assert {"upload_id", "filename"} <= set(body["fields"])


def test_create_refuses_a_text_field_sent_as_files(user_client: APIClient) -> None:
    response = post_multipart(user_client, "/api/submissions/", fields=[("files", "just text")])
    assert_error(response, HTTPStatus.BAD_REQUEST, "invalid_request")


# --- POST /api/submissions/{id}/files/ -------------------------------------------------------


def test_add_file_answers_201_with_its_description(user_client: APIClient, draft: str) -> None:
    response = add_file(user_client, draft, "config.yaml", b"lr: 0.1\n")
    assert response.status_code == HTTPStatus.CREATED
    body = response.json()
    assert set(body) == {"filename", "size", "sha256", "uploaded_at"}
    assert (body["filename"], body["size"], body["sha256"]) == ("config.yaml", 8, sha(b"lr: 0.1\n"))


def test_stored_object_holds_exactly_the_bytes_sent(user_client: APIClient, draft: str) -> None:
    from django.core.files.storage import storages

    content = bytes(range(256)) * 1000
    add_file(user_client, draft, "blob.py", content)
    row = SubmissionFile.objects.get(filename="blob.py")
    assert row.storage_name.startswith(f"submissions/{draft}/")
    assert row.storage_name.endswith("/blob.py")
    with storages["default"].open(row.storage_name, "rb") as handle:
        assert handle.read() == content


def test_identical_resend_answers_200_with_the_stored_file(
    user_client: APIClient, draft: str, stored_names: Walk
) -> None:
    first = add_file(user_client, draft, "config.yaml", b"a: 1")
    again = add_file(user_client, draft, "config.yaml", b"a: 1")
    assert first.status_code == HTTPStatus.CREATED
    assert again.status_code == HTTPStatus.OK
    assert again.json() == first.json()
    assert SubmissionFile.objects.filter(filename="config.yaml").count() == 1
    assert len(stored_names()) == 2


def test_same_name_other_content_is_duplicate_filename_case_insensitively(
    user_client: APIClient, draft: str, stored_names: Walk
) -> None:
    response = add_file(user_client, draft, "MAIN.PY", b"different")
    body = assert_error(response, HTTPStatus.BAD_REQUEST, "duplicate_filename")
    assert body["existing_filename"] == "main.py"
    assert len(stored_names()) == 1


@pytest.mark.parametrize(
    "name",
    [
        "../evil.py",
        "..\\evil.py",
        "dir/evil.py",
        "dir\\evil.py",
        "/etc/evil.py",
        "..",
        "a..b.py",
        "nul\x00.py",
        "bell\x07.py",
        "tab\t.py",
        "del\x7f.py",
        "C:evil.py",
        "é" * 127 + ".py",  # 254 + 3 = 257 UTF-8 bytes
        ".py",
    ],
)
def test_bad_names_are_invalid_filename(
    user_client: APIClient, draft: str, name: str, stored_names: Walk
) -> None:
    assert_error(
        add_file(user_client, draft, name, b"x"), HTTPStatus.BAD_REQUEST, "invalid_filename"
    )
    assert SubmissionFile.objects.count() == 1
    assert len(stored_names()) == 1


def test_name_of_exactly_255_utf8_bytes_is_accepted(user_client: APIClient, draft: str) -> None:
    name = "é" * 125 + "cd.py"  # 250 + 5 bytes
    assert len(name.encode()) == 255
    assert add_file(user_client, draft, name, b"x").status_code == HTTPStatus.CREATED


def test_name_rules_are_checked_before_the_extension_rule(
    user_client: APIClient, draft: str
) -> None:
    assert_error(
        add_file(user_client, draft, "../evil.exe", b"x"),
        HTTPStatus.BAD_REQUEST,
        "invalid_filename",
    )


@pytest.mark.parametrize(
    "name", ["tool.exe", "data.gz", "data.tar", "script.pyc", "noext", "a.py.txt"]
)
def test_other_extensions_are_invalid_extension(
    user_client: APIClient, draft: str, name: str
) -> None:
    assert_error(
        add_file(user_client, draft, name, b"x"), HTTPStatus.BAD_REQUEST, "invalid_extension"
    )


@pytest.mark.parametrize(
    "name", ["model.tar.gz", "Model.TAR.GZ", "settings.yaml", "x.zip", "lib.py"]
)
def test_allowed_extensions_are_matched_as_suffixes(
    user_client: APIClient, draft: str, name: str
) -> None:
    content = make_zip({"a": b"1"}) if name.lower().endswith(".zip") else b"x"
    if name.lower().endswith(".tar.gz"):
        content = make_tar_gz([("a.txt", b"1")])
    assert add_file(user_client, draft, name, content).status_code == HTTPStatus.CREATED


def test_empty_file_is_accepted(user_client: APIClient, draft: str) -> None:
    response = add_file(user_client, draft, "__init__.py", b"")
    assert response.status_code == HTTPStatus.CREATED
    assert response.json()["size"] == 0


def test_file_of_exactly_the_limit_is_accepted_one_more_byte_is_refused(
    user_client: APIClient, draft: str, settings: Any, stored_names: Walk
) -> None:
    settings.MAX_UPLOAD_FILE_SIZE = 3 * 1024 * 1024 + 7
    exact = b"a" * settings.MAX_UPLOAD_FILE_SIZE
    assert add_file(user_client, draft, "exact.py", exact).status_code == HTTPStatus.CREATED
    body = assert_error(
        add_file(user_client, draft, "over.py", exact + b"b"),
        HTTPStatus.BAD_REQUEST,
        "file_too_large",
    )
    assert body["max_size"] == settings.MAX_UPLOAD_FILE_SIZE
    assert not SubmissionFile.objects.filter(filename="over.py").exists()
    assert len(stored_names()) == 2


def test_create_with_an_oversize_file_keeps_nothing(
    user_client: APIClient, settings: Any, stored_names: Walk
) -> None:
    settings.MAX_UPLOAD_FILE_SIZE = 10
    response = create_submission(user_client, files=[("main.py", b"1"), ("big.py", b"x" * 11)])
    assert_error(response, HTTPStatus.BAD_REQUEST, "file_too_large")
    assert Submission.objects.count() == 0
    assert stored_names() == []


def test_checksum_header_is_verified_in_any_case(
    user_client: APIClient, draft: str, stored_names: Walk
) -> None:
    content = b"lr: 0.1"
    ok = add_file(
        user_client, draft, "a.yaml", content, headers={"X-Content-SHA256": sha(content).upper()}
    )
    assert ok.status_code == HTTPStatus.CREATED
    bad = add_file(
        user_client, draft, "b.yaml", content, headers={"X-Content-SHA256": sha(b"other")}
    )
    body = assert_error(bad, HTTPStatus.BAD_REQUEST, "checksum_mismatch")
    assert body["sha256"] == sha(content)
    assert not SubmissionFile.objects.filter(filename="b.yaml").exists()
    assert len(stored_names()) == 2


def test_malformed_checksum_header_is_invalid_request(user_client: APIClient, draft: str) -> None:
    response = add_file(user_client, draft, "a.yaml", b"x", headers={"X-Content-SHA256": "xyz"})
    assert_error(response, HTTPStatus.BAD_REQUEST, "invalid_request")


def test_files_beyond_the_limit_are_too_many_files(
    user_client: APIClient, draft: str, settings: Any, stored_names: Walk
) -> None:
    settings.MAX_FILES_PER_SUBMISSION = 2
    assert add_file(user_client, draft, "b.py", b"b").status_code == HTTPStatus.CREATED
    body = assert_error(
        add_file(user_client, draft, "c.py", b"c"), HTTPStatus.BAD_REQUEST, "too_many_files"
    )
    assert body["max_files"] == 2
    assert len(stored_names()) == 2


def test_sealed_submission_refuses_files_with_409(
    user_client: APIClient, draft: str, stored_names: Walk
) -> None:
    submission_transition(submission=Submission.objects.get(pk=draft), to=SubmissionStatus.PENDING)
    response = add_file(user_client, draft, "late.py", b"x")
    body = assert_error(response, HTTPStatus.CONFLICT, "submission_sealed")
    assert body["status"] == "pending"
    assert len(stored_names()) == 1


def test_another_users_submission_is_403(other_client: APIClient, draft: str) -> None:
    assert_error(
        add_file(other_client, draft, "x.py", b"x"), HTTPStatus.FORBIDDEN, "permission_denied"
    )
    assert_error(
        other_client.get(f"/api/submissions/{draft}/"), HTTPStatus.FORBIDDEN, "permission_denied"
    )
    assert_error(
        other_client.get(f"/api/submissions/{draft}/files/"),
        HTTPStatus.FORBIDDEN,
        "permission_denied",
    )


def test_unknown_submission_is_404(user_client: APIClient) -> None:
    missing = "0" * 32
    assert_error(add_file(user_client, missing, "x.py", b"x"), HTTPStatus.NOT_FOUND, "not_found")
    assert_error(user_client.get(f"/api/submissions/{missing}/"), HTTPStatus.NOT_FOUND, "not_found")
    assert_error(
        user_client.get(f"/api/submissions/{missing}/files/"), HTTPStatus.NOT_FOUND, "not_found"
    )


def test_add_requires_exactly_one_file(user_client: APIClient, draft: str) -> None:
    url = f"/api/submissions/{draft}/files/"
    none = post_multipart(user_client, url, fields=[("other", "x")])
    assert_error(none, HTTPStatus.BAD_REQUEST, "invalid_request")
    two = post_multipart(user_client, url, files=[("file", "a.py", b"a"), ("file", "b.py", b"b")])
    assert_error(two, HTTPStatus.BAD_REQUEST, "invalid_request")
    assert SubmissionFile.objects.count() == 1


def test_malformed_multipart_is_invalid_request(user_client: APIClient, draft: str) -> None:
    response = user_client.generic(
        "POST",
        f"/api/submissions/{draft}/files/",
        b"garbage",  # type: ignore[arg-type]
        content_type="multipart/form-data; boundary=",
    )
    assert_error(response, HTTPStatus.BAD_REQUEST, "invalid_request")


# --- archives --------------------------------------------------------------------------------


def _tar_member(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


def test_safe_archives_are_accepted(user_client: APIClient, draft: str) -> None:
    zipped = make_zip({"pkg/": b"", "pkg/a.py": b"1", "data/b.csv": b"2"})
    assert add_file(user_client, draft, "code.zip", zipped).status_code == HTTPStatus.CREATED
    tarred = make_tar_gz([_tar_member("pkg", tarfile.DIRTYPE), ("pkg/a.py", b"1")])
    assert add_file(user_client, draft, "code.tar.gz", tarred).status_code == HTTPStatus.CREATED


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("bad.zip", b"PK\x03\x04 not really a zip"),
        ("bad.zip", b""),
        ("bad.tar.gz", b"\x1f\x8b\x08 truncated gzip"),
        ("bad.tar.gz", b"plain text"),
        # Named: the gzip header holds the time, and the id of every test must be the same in
        # each process that collects it (pytest-xdist's workers).
        pytest.param(
            "bad.tar.gz",
            __import__("gzip").compress(b"gzip but not a tar" * 100),
            id="bad.tar.gz-gzip but not a tar",
        ),
    ],
)
def test_unreadable_archives_are_invalid_archive(
    user_client: APIClient, draft: str, name: str, content: bytes, stored_names: Walk
) -> None:
    assert_error(
        add_file(user_client, draft, name, content), HTTPStatus.BAD_REQUEST, "invalid_archive"
    )
    assert len(stored_names()) == 1


@pytest.mark.parametrize(
    "content",
    [
        make_zip({"../escape.py": b"x"}),
        make_zip({"/etc/cron.d/x": b"x"}),
        make_zip({"a/../../x": b"x"}),
        make_zip({"ok.py": b"x"}, symlink="link"),
        make_zip({"C:/windows/x": b"x"}),
    ],
    ids=["dotdot", "absolute", "nested-dotdot", "symlink", "drive"],
)
def test_unsafe_zip_is_unsafe_archive(
    user_client: APIClient, draft: str, content: bytes, stored_names: Walk
) -> None:
    assert_error(
        add_file(user_client, draft, "x.zip", content), HTTPStatus.BAD_REQUEST, "unsafe_archive"
    )
    assert len(stored_names()) == 1


@pytest.mark.parametrize(
    "member",
    [
        ("../escape.py", b"x"),
        ("/abs.py", b"x"),
        _tar_member("link", tarfile.SYMTYPE, "/etc/passwd"),
        _tar_member("hard", tarfile.LNKTYPE, "other"),
        _tar_member("dev", tarfile.CHRTYPE),
        _tar_member("blk", tarfile.BLKTYPE),
        _tar_member("fifo", tarfile.FIFOTYPE),
    ],
    ids=["dotdot", "absolute", "symlink", "hardlink", "chardev", "blockdev", "fifo"],
)
def test_unsafe_tar_gz_is_unsafe_archive(
    user_client: APIClient, draft: str, member: Any, stored_names: Walk
) -> None:
    content = make_tar_gz([("ok.py", b"1"), member])
    assert_error(
        add_file(user_client, draft, "x.tar.gz", content), HTTPStatus.BAD_REQUEST, "unsafe_archive"
    )
    assert len(stored_names()) == 1


def test_tar_gz_unpacking_past_the_limit_is_unsafe_archive(
    user_client: APIClient, draft: str, settings: Any
) -> None:
    settings.GRADING_MAX_UNPACKED_SIZE = 1000
    content = make_tar_gz([("big.bin", b"\x00" * 2000)])
    assert_error(
        add_file(user_client, draft, "x.tar.gz", content), HTTPStatus.BAD_REQUEST, "unsafe_archive"
    )


# --- reads -----------------------------------------------------------------------------------


def test_files_are_listed_in_upload_order(user_client: APIClient, draft: str) -> None:
    for name in ["z.py", "a.py", "m.yaml"]:
        add_file(user_client, draft, name, name.encode())
    response = user_client.get(f"/api/submissions/{draft}/files/")
    assert response.status_code == HTTPStatus.OK
    files = response.json()["files"]
    assert [f["filename"] for f in files] == ["main.py", "z.py", "a.py", "m.yaml"]
    assert files[1] == {
        "id": files[1]["id"],
        "filename": "z.py",
        "size": 4,
        "sha256": sha(b"z.py"),
        "uploaded_at": files[1]["uploaded_at"],
        "download_url": f"/api/submissions/{draft}/files/{files[1]['id']}/download/",
    }


def test_detail_shows_the_submission_and_its_files(user_client: APIClient, draft: str) -> None:
    body = user_client.get(f"/api/submissions/{draft}/").json()
    assert body["submission_id"] == draft
    assert [f["filename"] for f in body["files"]] == ["main.py"]


def test_list_shows_only_own_submissions_newest_first_paginated(
    user_client: APIClient, other_client: APIClient
) -> None:
    mine = [create_submission(user_client).json()["submission_id"] for _ in range(3)]
    create_submission(other_client)
    body = user_client.get("/api/submissions/?limit=2").json()
    assert body["count"] == 3
    assert [s["submission_id"] for s in body["results"]] == mine[::-1][:2]
    assert body["next"]
    rest = user_client.get("/api/submissions/?limit=2&offset=2").json()
    assert [s["submission_id"] for s in rest["results"]] == [mine[0]]


def test_list_needs_a_fixed_number_of_queries(
    user_client: APIClient, django_assert_max_num_queries: Any
) -> None:
    for _ in range(5):
        create_submission(user_client, files=[("main.py", b"1"), ("config.yaml", b"2")])
    with django_assert_max_num_queries(5):
        response = user_client.get("/api/submissions/")
    assert len(response.json()["results"]) == 5


def test_body_declaring_more_than_a_file_can_hold_is_refused_before_reading(
    user_client: APIClient, draft: str, settings: Any, stored_names: Walk
) -> None:
    settings.MAX_UPLOAD_FILE_SIZE = 10
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    response = add_file(user_client, draft, "big.py", b"x" * (70 * 1024))
    body = assert_error(response, HTTPStatus.BAD_REQUEST, "file_too_large")
    assert "nothing was read" in body["error"]
    assert len(stored_names()) == 1


def test_body_slightly_over_the_limit_is_cut_off_by_the_handler(
    user_client: APIClient, draft: str, settings: Any
) -> None:
    settings.MAX_UPLOAD_FILE_SIZE = 10
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    response = add_file(user_client, draft, "big.py", b"x" * 1000)
    body = assert_error(response, HTTPStatus.BAD_REQUEST, "file_too_large")
    assert "nothing was read" not in body["error"]


@pytest.mark.parametrize("bad_id", ["nope", "%00", "A" * 32, "0" * 33])
def test_malformed_ids_are_404(user_client: APIClient, bad_id: str) -> None:
    assert_error(user_client.get(f"/api/submissions/{bad_id}/"), HTTPStatus.NOT_FOUND, "not_found")
    assert_error(add_file(user_client, bad_id, "a.py", b"x"), HTTPStatus.NOT_FOUND, "not_found")
