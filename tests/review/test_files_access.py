"""Who reads a submission's files, members, bytes and job logs: owner, reviewer, staff — and
everyone else refused with the exact code, by the submissions API, the review API and the job
logs alike."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.review.models import ReviewRecord
from apps.submissions.models import Submission, SubmissionStatus
from tests.factories.jobs import make_job
from tests.factories.submissions import add_file, make_stored_submission, tar_gz_bytes, zip_bytes
from tests.factories.tokens import make_token

pytestmark = pytest.mark.django_db

Client = Callable[[User], APIClient]


def token_client(user: User, *scopes: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token(user, scopes=scopes)}")
    return client


def body_of(response: Any) -> bytes:
    """The streamed body, read to its end (the test client closes the response there)."""
    return b"".join(response.streaming_content)


def assert_error(response: Any, status: HTTPStatus, code: str) -> None:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["success"] is False
    assert body["code"] == code


def stored(owner: User, **fields: Any) -> Submission:
    return make_stored_submission(owner, program="print('hi')\n", **fields)


@pytest.fixture
def waiting(user: User) -> Submission:
    submission = stored(user, status=SubmissionStatus.REVIEW_PENDING, score=0.5)
    add_file(submission, "answers.zip", zip_bytes({"a/answer.txt": b"42\n", "b.bin": b"\x00" * 9}))
    return submission


def urls(submission: Submission) -> dict[str, str]:
    file = submission.files.get(filename="config.yaml")
    job = make_job(submission)
    base = f"/api/submissions/{submission.pk}/"
    return {
        "detail": base,
        "files": f"{base}files/",
        "download": f"{base}files/{file.pk}/download/",
        "logs": f"/api/jobs/{job.pk}/logs/",
        "review": f"/api/review/submissions/{submission.pk}/",
        "review_download": f"/api/review/submissions/{submission.pk}/files/{file.pk}/download/",
    }


def fetch(client: APIClient, url: str) -> Any:
    response = client.get(url)
    if hasattr(response, "streaming_content"):
        body_of(response)
    return response


OWNER_PATHS = ("detail", "files", "download", "logs")


def test_owner_reads_every_owner_path_with_a_read_token(user: User, waiting: Submission) -> None:
    paths = urls(waiting)
    client = token_client(user, "read")
    for name in OWNER_PATHS:
        assert fetch(client, paths[name]).status_code == HTTPStatus.OK, name


def test_reviewer_reads_a_submission_awaiting_review_everywhere(
    reviewer: User, waiting: Submission, client_for: Client
) -> None:
    paths = urls(waiting)
    client = client_for(reviewer)
    for name, url in paths.items():
        assert fetch(client, url).status_code == HTTPStatus.OK, name


def test_staff_reads_any_submission(staff_client: APIClient, user: User) -> None:
    finished = stored(user, status=SubmissionStatus.COMPLETED)
    for name, url in urls(finished).items():
        assert fetch(staff_client, url).status_code == HTTPStatus.OK, name


def test_another_user_is_refused_everywhere_with_permission_denied(
    waiting: Submission, other_client: APIClient
) -> None:
    paths = urls(waiting)
    for name in OWNER_PATHS:
        assert_error(other_client.get(paths[name]), HTTPStatus.FORBIDDEN, "permission_denied")
    for name in ("review", "review_download"):
        assert_error(other_client.get(paths[name]), HTTPStatus.FORBIDDEN, "permission_denied")


def test_anonymous_is_refused_everywhere_with_not_authenticated(
    waiting: Submission, api_client: APIClient
) -> None:
    for url in urls(waiting).values():
        assert_error(api_client.get(url), HTTPStatus.UNAUTHORIZED, "not_authenticated")


def test_reviewer_is_refused_a_finished_submission_they_never_claimed_or_judged(
    user: User, reviewer: User, client_for: Client
) -> None:
    finished = stored(user, status=SubmissionStatus.COMPLETED)
    client = client_for(reviewer)
    for url in urls(finished).values():
        assert_error(client.get(url), HTTPStatus.FORBIDDEN, "permission_denied")


def test_reviewer_reads_again_what_they_judged_and_not_what_another_judged(
    user: User, reviewer: User, other_reviewer: User, client_for: Client
) -> None:
    judged = stored(user, status=SubmissionStatus.COMPLETED)
    ReviewRecord.objects.create(submission=judged, reviewer=reviewer, verdict="approve")
    paths = urls(judged)
    for name, url in paths.items():
        assert fetch(client_for(reviewer), url).status_code == HTTPStatus.OK, name
    assert_error(
        client_for(other_reviewer).get(paths["review"]), HTTPStatus.FORBIDDEN, "permission_denied"
    )


def test_reviewer_who_claimed_reads_it_after_the_verdict_through_the_api(
    user: User, reviewer: User, client_for: Client, waiting: Submission
) -> None:
    client = client_for(reviewer)
    assert client.post(f"/api/review/submissions/{waiting.pk}/claim/").status_code == 200
    done = client.post(
        f"/api/review/submissions/{waiting.pk}/complete/", {"verdict": "reject"}, format="json"
    )
    assert done.status_code == HTTPStatus.OK
    assert fetch(client, urls(waiting)["review"]).status_code == HTTPStatus.OK


def test_a_read_token_without_review_is_refused_on_the_review_api(
    reviewer: User, waiting: Submission
) -> None:
    paths = urls(waiting)
    client = token_client(reviewer, "read", "submit")
    for name in ("review", "review_download"):
        assert_error(client.get(paths[name]), HTTPStatus.FORBIDDEN, "insufficient_scope")


def test_reading_someone_elses_submission_needs_review_besides_read(
    reviewer: User, waiting: Submission
) -> None:
    paths = urls(waiting)
    read_only = token_client(reviewer, "read")
    for name in OWNER_PATHS:
        assert_error(read_only.get(paths[name]), HTTPStatus.FORBIDDEN, "insufficient_scope")
    both = token_client(reviewer, "read", "review")
    for name in OWNER_PATHS:
        assert fetch(both, paths[name]).status_code == HTTPStatus.OK, name


def test_a_reviewer_reads_their_own_submission_but_still_cannot_claim_it(
    reviewer: User, client_for: Client
) -> None:
    own = stored(reviewer, status=SubmissionStatus.REVIEW_PENDING)
    client = client_for(reviewer)
    assert fetch(client, urls(own)["review"]).status_code == HTTPStatus.OK
    claim = client.post(f"/api/review/submissions/{own.pk}/claim/")
    assert_error(claim, HTTPStatus.CONFLICT, "own_submission")


def test_a_file_id_of_another_submission_is_not_found_through_a_readable_one(
    user: User, other_user: User, reviewer: User, client_for: Client, waiting: Submission
) -> None:
    secret = stored(other_user, status=SubmissionStatus.COMPLETED)
    foreign = secret.files.get(filename="config.yaml")
    for prefix in ("/api/submissions/", "/api/review/submissions/"):
        url = f"{prefix}{waiting.pk}/files/{foreign.pk}/download/"
        assert_error(client_for(reviewer).get(url), HTTPStatus.NOT_FOUND, "not_found")


@pytest.mark.parametrize("file_id", ["0", "99999999999999999999999", "-1", "1e3", "%00"])
def test_a_malformed_file_id_is_a_json_404(
    user_client: APIClient, waiting: Submission, file_id: str
) -> None:
    response = user_client.get(f"/api/submissions/{waiting.pk}/files/{file_id}/download/")
    assert_error(response, HTTPStatus.NOT_FOUND, "not_found")


def test_files_list_gives_each_file_its_id_and_download_path(
    user_client: APIClient, waiting: Submission
) -> None:
    files = user_client.get(f"/api/submissions/{waiting.pk}/files/").json()["files"]
    by_name = {f["filename"]: f for f in files}
    answers = by_name["answers.zip"]
    assert answers["download_url"] == (
        f"/api/submissions/{waiting.pk}/files/{answers['id']}/download/"
    )


def test_review_detail_lists_archive_members_and_a_download_path_for_every_file(
    reviewer: User, client_for: Client, waiting: Submission
) -> None:
    add_file(waiting, "more.tar.gz", tar_gz_bytes({"deep/x.py": b"print(1)\n"}))
    add_file(waiting, "big.py", b"#" * (70 * 1024))
    body = client_for(reviewer).get(f"/api/review/submissions/{waiting.pk}/").json()
    files = {f["filename"]: f for f in body["files"]}

    zip_members = {(m["name"], m["size"], m["type"]) for m in files["answers.zip"]["members"]}
    assert zip_members == {("a/answer.txt", 3, "file"), ("b.bin", 9, "file")}
    assert files["more.tar.gz"]["members"] == [{"name": "deep/x.py", "size": 9, "type": "file"}]
    assert files["config.yaml"]["members"] is None
    assert files["config.yaml"]["text"] == "answer: 42\n"
    assert files["big.py"]["text"] is None
    for name, file in files.items():
        assert file["download_url"] == (
            f"/api/review/submissions/{waiting.pk}/files/{file['id']}/download/"
        ), name
