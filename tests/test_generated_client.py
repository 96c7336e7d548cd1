"""A third party's client: generated from the live `/api/schema/` by openapi-python-client with
its default settings, it creates a submission and enqueues a job against a live server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from apps.jobs.models import Job, JobStatus
from tests.factories.users import make_user

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

USE_THE_CLIENT = textwrap.dedent(
    """
    import json, sys
    from yoyaku_api_client import AuthenticatedClient
    from yoyaku_api_client.api.jobs import jobs_retrieve, jobs_submit
    from yoyaku_api_client.api.submissions import submissions_create
    from yoyaku_api_client.models import JobSubmitInputRequest, SubmissionCreateInputRequest
    from yoyaku_api_client.types import File

    url, token, folder = sys.argv[1:4]
    client = AuthenticatedClient(base_url=url, token=token, raise_on_unexpected_status=True)
    with open(f"{folder}/main.py", "rb") as main, open(f"{folder}/config.yaml", "rb") as config:
        created = submissions_create.sync_detailed(
            client=client,
            body=SubmissionCreateInputRequest(
                files=[
                    File(payload=main, file_name="main.py"),
                    File(payload=config, file_name="config.yaml"),
                ],
                question_id="q-generated",
            ),
        )
    assert created.status_code == 201, created.content
    submission_id = created.parsed.submission_id
    submitted = jobs_submit.sync_detailed(
        client=client,
        body=JobSubmitInputRequest(submission_id=submission_id, idempotency_key="generated-1"),
    )
    assert submitted.status_code == 201, submitted.content
    job = jobs_retrieve.sync(submitted.parsed.job_id, client=client)
    print(json.dumps({"submission_id": submission_id, "job_id": job.job_id,
                      "status": str(job.status.value)}))
    """
)


def _generate(schema_url: str, into: Path) -> Path:
    """openapi-python-client with its defaults (its post-hooks run the ruff on PATH)."""
    schema = into / "schema.json"
    with urllib.request.urlopen(schema_url + "?format=json", timeout=30) as response:  # noqa: S310
        schema.write_bytes(response.read())
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [str(BIN / "openapi-python-client"), "generate", "--path", str(schema)],
        cwd=into,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr
    return into / "yoyaku-api-client"


@pytest.fixture
def researcher(transactional_db: None) -> User:
    return make_user(username="third-party")


def test_a_client_generated_from_the_schema_submits_a_job(
    live_server: Any, researcher: User, tmp_path: Path
) -> None:
    package = _generate(f"{live_server.url}/api/schema/", tmp_path)
    token = Token.objects.create(user=researcher).key
    script = tmp_path / "use_client.py"
    script.write_text(USE_THE_CLIENT)
    done = subprocess.run(
        [sys.executable, str(script), live_server.url, token, str(ROOT / "examples" / "hello")],
        env={**os.environ, "PYTHONPATH": str(package)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == JobStatus.QUEUED
    job = Job.objects.get(pk=result["job_id"])
    assert job.owner == researcher
    assert job.submission_id == result["submission_id"]
