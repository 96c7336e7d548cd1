"""Cleanup kinds `drafts` and `orphan_files`, the admin, and the upload handler's cut-off."""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
import time_machine
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.submissions.exceptions import FileTooLarge
from apps.submissions.models import Submission, SubmissionFile, SubmissionStatus
from apps.submissions.services.transitions import submission_transition
from apps.submissions.uploads import SubmissionUploadHandler
from tests.submissions.conftest import add_file, create_submission

pytestmark = pytest.mark.django_db

Walk = Callable[[], list[str]]


def _cleanup(*args: str) -> str:
    out = io.StringIO()
    call_command("cleanup", "--only", "drafts", *args, stdout=out)
    return out.getvalue()


def _later(settings: Any, extra: dt.timedelta) -> dt.datetime:
    return timezone.now() + dt.timedelta(days=settings.SUBMISSION_DRAFT_TTL_DAYS) + extra


def test_old_drafts_are_removed_with_their_files(
    user_client: APIClient,
    settings: Any,
    stored_names: Walk,
    django_capture_on_commit_callbacks: Any,
) -> None:
    old = create_submission(user_client).json()["submission_id"]
    add_file(user_client, old, "b.py", b"b")
    sealed = create_submission(user_client).json()["submission_id"]
    submission_transition(submission=Submission.objects.get(pk=sealed), to=SubmissionStatus.PENDING)
    with time_machine.travel(_later(settings, dt.timedelta(hours=-1)), tick=False):
        young = create_submission(user_client).json()["submission_id"]
    assert len(stored_names()) == 4

    with time_machine.travel(_later(settings, dt.timedelta(minutes=1)), tick=False):
        preview = _cleanup("--dry-run")
        assert "drafts: would remove 1" in preview
        assert old in preview
        assert Submission.objects.filter(pk=old).exists()
        assert len(stored_names()) == 4

        with django_capture_on_commit_callbacks(execute=True):
            report = _cleanup()

    assert "drafts: removed 1" in report
    assert set(Submission.objects.values_list("id", flat=True)) == {sealed, young}
    assert not SubmissionFile.objects.filter(submission_id=old).exists()
    remaining = stored_names()
    assert len(remaining) == 2
    assert not any(old in name for name in remaining)


def test_orphan_uploads_are_swept_after_the_grace(
    user_client: APIClient, settings: Any, stored_names: Walk
) -> None:
    """An object stored by an upload whose row never committed (its web process was killed
    in between) is deleted by `orphan_files` once older than the grace; files that rows name
    stay."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import storages

    submission_id = create_submission(user_client).json()["submission_id"]
    named = set(SubmissionFile.objects.values_list("storage_name", flat=True))
    storage = storages["default"]
    orphans = {
        storage.save(f"submissions/{submission_id}/{'a' * 32}/main.py", ContentFile(b"1")),
        storage.save(f"submissions/{'b' * 32}/{'c' * 32}/config.yaml", ContentFile(b"2")),
    }
    assert set(stored_names()) == named | orphans

    out = io.StringIO()
    call_command("cleanup", "--only", "orphan_files", stdout=out)
    assert "orphan_files: removed 0" in out.getvalue()
    later = timezone.now() + dt.timedelta(minutes=settings.STORED_ORPHAN_GRACE_MINUTES + 1)
    with time_machine.travel(later, tick=False):
        call_command("cleanup", "--only", "orphan_files", "--dry-run", stdout=out)
        assert set(stored_names()) == named | orphans
        call_command("cleanup", "--only", "orphan_files", stdout=out)
    assert "orphan_files: would remove 2" in out.getvalue()
    assert "orphan_files: removed 2" in out.getvalue()
    assert set(stored_names()) == named


def test_cleanup_ttl_accepts_fractions_of_a_day(user_client: APIClient, settings: Any) -> None:
    settings.SUBMISSION_DRAFT_TTL_DAYS = 0.5
    create_submission(user_client)
    with time_machine.travel(timezone.now() + dt.timedelta(hours=11), tick=False):
        assert "would remove 0" in _cleanup("--dry-run")
    with time_machine.travel(timezone.now() + dt.timedelta(hours=13), tick=False):
        assert "would remove 1" in _cleanup("--dry-run")


# --- admin -----------------------------------------------------------------------------------


@pytest.fixture
def admin_client(staff_user: Any) -> Client:
    client = Client()
    client.force_login(staff_user)
    return client


def test_admin_lists_searches_filters_and_shows_files_inline(
    admin_client: Client, user_client: APIClient, user: Any
) -> None:
    submission_id = create_submission(
        user_client, fields=[("question_id", "q-42")], files=[("main.py", b"1"), ("c.yaml", b"22")]
    ).json()["submission_id"]

    listing = admin_client.get(
        "/admin/submissions/submission/", {"q": "q-42", "status__exact": "draft"}
    )
    assert listing.status_code == HTTPStatus.OK
    assert submission_id in listing.content.decode()
    by_owner = admin_client.get("/admin/submissions/submission/", {"q": user.username})
    assert submission_id in by_owner.content.decode()
    none = admin_client.get("/admin/submissions/submission/", {"status__exact": "pending"})
    assert submission_id not in none.content.decode()

    page = admin_client.get(
        f"/admin/submissions/submission/{submission_id}/change/"
    ).content.decode()
    assert "c.yaml" in page
    row = SubmissionFile.objects.get(filename="c.yaml")
    assert row.sha256 in page

    assert admin_client.get("/admin/submissions/submissionfile/").status_code == HTTPStatus.OK


def test_admin_action_deletes_drafts_with_their_files_only(
    admin_client: Client,
    user_client: APIClient,
    stored_names: Walk,
    django_capture_on_commit_callbacks: Any,
) -> None:
    draft = create_submission(user_client).json()["submission_id"]
    sealed = create_submission(user_client).json()["submission_id"]
    submission_transition(submission=Submission.objects.get(pk=sealed), to=SubmissionStatus.PENDING)

    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            "/admin/submissions/submission/",
            {"action": "delete_drafts_with_files", "_selected_action": [draft, sealed]},
            follow=True,
        )

    assert response.status_code == HTTPStatus.OK
    assert list(Submission.objects.values_list("id", flat=True)) == [sealed]
    assert len(stored_names()) == 1


def test_admin_delete_removes_stored_files(
    admin_client: Client,
    user_client: APIClient,
    stored_names: Walk,
    django_capture_on_commit_callbacks: Any,
) -> None:
    submission_id = create_submission(user_client).json()["submission_id"]
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            f"/admin/submissions/submission/{submission_id}/delete/", {"post": "yes"}
        )
    assert response.status_code == HTTPStatus.FOUND, response.content.decode()[:3000]
    assert not Submission.objects.exists()
    assert stored_names() == []


# --- the upload handler ----------------------------------------------------------------------


def test_handler_stops_writing_at_the_limit(settings: Any) -> None:
    settings.MAX_UPLOAD_FILE_SIZE = 10
    handler = SubmissionUploadHandler()
    with pytest.raises(Exception) as stop:  # noqa: PT011 - StopFutureHandlers, by design
        handler.new_file("file", "a.py", "text/plain", None)
    assert type(stop.value).__name__ == "StopFutureHandlers"
    handler.receive_data_chunk(b"x" * 6, 0)
    handler.receive_data_chunk(b"x" * 4, 6)  # exactly the limit
    with pytest.raises(FileTooLarge):
        handler.receive_data_chunk(b"x", 10)
    assert handler.current is not None
    handler.current.flush()
    with open(handler.current.temporary_file_path(), "rb") as written:
        assert len(written.read()) == 10
    path = handler.current.temporary_file_path()
    handler.discard()
    import os

    assert not os.path.exists(path)


def test_handler_refuses_a_declared_oversize_part_before_writing(settings: Any) -> None:
    settings.MAX_UPLOAD_FILE_SIZE = 10
    handler = SubmissionUploadHandler()
    with pytest.raises(FileTooLarge):
        handler.new_file("file", "a.py", "text/plain", 11)
    assert handler.received == []


def test_a_large_upload_never_sits_whole_in_memory(
    user_client: APIClient, settings: Any, stored_names: Walk
) -> None:
    """The test client itself copies the body once; the server side must add only chunks."""
    import tracemalloc

    from tests.submissions.conftest import multipart

    size = 32 * 1024 * 1024
    settings.MAX_UPLOAD_FILE_SIZE = size
    submission_id = create_submission(user_client).json()["submission_id"]
    body, content_type = multipart(files=[("file", "big.py", b"\x01" * size)])
    tracemalloc.start()
    try:
        response = user_client.generic(
            "POST",
            f"/api/submissions/{submission_id}/files/",
            body,  # type: ignore[arg-type]
            content_type=content_type,
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == HTTPStatus.CREATED
    assert peak < size + 12 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB"
    assert len(stored_names()) == 2


def test_orphan_files_never_removes_an_object_a_row_names_whatever_its_name(
    user_client: APIClient, settings: Any, stored_names: Walk
) -> None:
    """Names that differ only by case or Unicode form are one name (`filename_fold`): the
    second is refused and its object removed at once; every object a row names, however
    spelled (decomposed, non-ASCII, spaces), survives `orphan_files` past the grace."""
    submission_id = create_submission(
        user_client, files=[("main.py", b"1"), ("\u00c9t\u00e9 x.py", b"2")]
    ).json()["submission_id"]
    assert add_file(user_client, submission_id, "e\u0301te\u0301 X.py", b"3").status_code == (
        HTTPStatus.BAD_REQUEST
    )
    assert add_file(user_client, submission_id, "\u01c4z.py", b"4").status_code == (
        HTTPStatus.CREATED
    )
    assert add_file(user_client, submission_id, "\u01c6Z.py", b"5").status_code == (
        HTTPStatus.BAD_REQUEST
    )
    named = set(SubmissionFile.objects.values_list("storage_name", flat=True))
    assert len(named) == 3
    assert set(stored_names()) == named

    later = timezone.now() + dt.timedelta(minutes=settings.STORED_ORPHAN_GRACE_MINUTES + 1)
    out = io.StringIO()
    with time_machine.travel(later, tick=False):
        call_command("cleanup", "--only", "orphan_files", stdout=out)
    assert "orphan_files: removed 0" in out.getvalue()
    assert set(stored_names()) == named
