"""Upload metrics, read from a real /metrics scrape after uploads through the API: outcomes by
code (created, safe_retry, each refusal), file sizes and stored bytes."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.metrics import deltas, scrape
from tests.submissions.conftest import post_multipart

pytestmark = pytest.mark.django_db

UPLOADS = "yoyaku_uploads_total"


def test_upload_outcomes_sizes_and_bytes_are_counted(
    user_client: APIClient, other_client: APIClient, settings: Any
) -> None:
    settings.MAX_UPLOAD_FILE_SIZE = 1000
    before = scrape(settings)
    main = b"print('hi')\n" * 10  # 120 bytes
    created = post_multipart(user_client, "/api/submissions/", files=[("files", "main.py", main)])
    assert created.status_code == HTTPStatus.CREATED
    url = f"/api/submissions/{created.json()['submission_id']}/files/"
    config = b"a: 1\n" * 100  # 500 bytes
    answers = [
        post_multipart(user_client, url, files=[("file", "config.yaml", config)]),  # 201
        post_multipart(user_client, url, files=[("file", "config.yaml", config)]),  # 200 retry
        post_multipart(user_client, url, files=[("file", "CONFIG.yaml", b"b: 2\n")]),  # dup
        post_multipart(user_client, url, files=[("file", "notes.txt", b"x")]),  # extension
        post_multipart(user_client, url, files=[("file", "../up.py", b"x")]),  # filename
        post_multipart(user_client, url, files=[("file", "big.py", b"#" * 1001)]),  # too large
        post_multipart(other_client, url, files=[("file", "x.py", b"x")]),  # 403
        post_multipart(
            user_client,
            url,
            files=[("file", "sum.py", b"x")],
            headers={"X-Content-SHA256": "0" * 64},
        ),
    ]
    assert [a.status_code for a in answers] == [201, 200, 400, 400, 400, 400, 403, 400]
    after = scrape(settings)
    assert deltas(before, after, UPLOADS, "outcome") == {
        "created": 2,
        "safe_retry": 1,
        "duplicate_filename": 1,
        "invalid_extension": 1,
        "invalid_filename": 1,
        "file_too_large": 1,
        "permission_denied": 1,
        "checksum_mismatch": 1,
    }
    size = "yoyaku_upload_file_size_bytes"
    assert after.value(f"{size}_count") - before.value(f"{size}_count") == 2
    assert after.value(f"{size}_sum") - before.value(f"{size}_sum") == 620
    # 120 bytes land in the 1 KiB bucket, 500 too: both at le=1024.
    bucket = f"{size}_bucket"
    assert after.value(bucket, le="1024.0") - before.value(bucket, le="1024.0") == 2
    stored = "yoyaku_upload_stored_bytes_total"
    assert after.value(stored) - before.value(stored) == 620


def test_a_sealed_submission_and_an_unknown_one_are_counted_by_code(
    user_client: APIClient, settings: Any
) -> None:
    from apps.submissions.models import Submission, SubmissionStatus

    created = post_multipart(user_client, "/api/submissions/", files=[("files", "main.py", b"1")])
    submission_id = created.json()["submission_id"]
    Submission.objects.filter(pk=submission_id).update(status=SubmissionStatus.PENDING)
    before = scrape(settings)
    sealed = post_multipart(
        user_client, f"/api/submissions/{submission_id}/files/", files=[("file", "a.py", b"1")]
    )
    unknown = post_multipart(
        user_client, "/api/submissions/" + "f" * 32 + "/files/", files=[("file", "a.py", b"1")]
    )
    assert (sealed.status_code, unknown.status_code) == (409, 404)
    after = scrape(settings)
    assert deltas(before, after, UPLOADS, "outcome") == {"submission_sealed": 1, "not_found": 1}
