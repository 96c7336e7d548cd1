"""Real processes: two gunicorn workers whose counts /metrics sums (multiprocess mode), and one
request id that follows a job from the web process's log line to the worker's."""

from __future__ import annotations

import json
import socket
import threading
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from prometheus_client.multiprocess import MultiProcessCollector

from apps.core.queue import task_broker
from apps.jobs.models import Job, JobStatus
from apps.submissions.models import SubmissionStatus
from tests.factories.submissions import make_stored_submission
from tests.factories.tokens import make_token
from tests.metrics import TOKEN, Scrape, parse
from tests.processes import Start, child_env, http_request, start_gunicorn, stop, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def scrape_over_http(port: int) -> Scrape:
    status, _, body = http_request(port, "GET", "/metrics", Authorization=f"Bearer {TOKEN}")
    assert status == HTTPStatus.OK
    return parse(body.decode())


def worker_pids(master: int) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return [int(pid) for pid in children]


def counted_by(pid: int, **labels: str) -> float:
    """What the metric files of process `pid` alone hold for `yoyaku_http_requests_total`."""
    folder = Path(django_settings.PROMETHEUS_MULTIPROC_DIR)
    files = [str(path) for path in folder.glob(f"counter_{pid}.db")]
    total = 0.0
    for family in MultiProcessCollector.merge(files):
        for sample in family.samples:
            if sample.name == "yoyaku_http_requests_total" and all(
                sample.labels.get(k) == v for k, v in labels.items()
            ):
                total += sample.value
    return total


def test_two_gunicorn_workers_counts_are_summed_by_metrics(
    start_process: Start, tmp_path: Path
) -> None:
    port, master = start_gunicorn(
        start_process, "web", workers=2, METRICS_TOKEN=TOKEN, REQUEST_HEADER_TIMEOUT="120"
    )
    pids = worker_pids(master.pid)
    assert len(pids) == 2
    labels = {"route": "me", "method": "GET", "status_class": "4xx"}
    before = scrape_over_http(port)
    before_by_worker = [counted_by(pid, **labels) for pid in pids]
    # Half a request waits in its worker's event loop while the others are served; completed
    # at the end, it counts once.

    def served_since(counts: list[float]) -> list[float]:
        return [counted_by(pid, **labels) - n for pid, n in zip(pids, counts, strict=True)]

    held = socket.create_connection(("127.0.0.1", port))
    held.sendall(b"GET /api/me/ HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    threads, per_thread = 8, 10
    failures: list[int] = []

    def hammer(barrier: threading.Barrier) -> None:
        barrier.wait()
        for _ in range(per_thread):
            status = http_request(port, "GET", "/api/me/")[0]
            if status != HTTPStatus.UNAUTHORIZED:
                failures.append(status)

    # Which worker accepts a connection is the kernel's choice: bursts go on (a bounded number)
    # until each worker has served some.
    sent = 0
    for _ in range(20):
        barrier = threading.Barrier(threads)
        pool = [threading.Thread(target=hammer, args=(barrier,)) for _ in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        sent += threads * per_thread
        if all(n > 0 for n in served_since(before_by_worker)):
            break
    assert failures == []
    held.sendall(b"Connection: close\r\n\r\n")
    assert held.recv(64).startswith(b"HTTP/1.1 401")
    held.close()
    total = sent + 1
    after = scrape_over_http(port)
    name = "yoyaku_http_requests_total"
    assert after.value(name, **labels) - before.value(name, **labels) == total
    count = "yoyaku_http_request_duration_seconds_count"
    assert after.value(count, route="me") - before.value(count, route="me") == total
    # Each worker wrote its own file; both served some of the requests, and the scrape (served
    # by one of them) summed both.
    per_worker = served_since(before_by_worker)
    assert all(n > 0 for n in per_worker), per_worker
    assert sum(per_worker) == total


def json_lines(path: Path) -> list[dict[str, Any]]:
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"{path.name}: not a JSON line: {line!r}") from None
    return parsed


def test_one_request_id_follows_the_job_from_the_web_log_to_the_worker_log(
    user: User, start_process: Start, tmp_path: Path
) -> None:
    task_broker().purge_queue()
    submission = make_stored_submission(user, status=SubmissionStatus.DRAFT, program="print(1)")
    token = make_token(user)
    port, web = start_gunicorn(
        start_process, "web", workers=1, LOG_FORMAT="json", METRICS_TOKEN=TOKEN
    )
    worker = start_process(
        "worker",
        ["manage.py", "qcluster"],
        child_env(LOG_FORMAT="json", GRADER="tests.grading.graders.RecordingGrader"),
    )
    status, headers, body = http_request(
        port,
        "POST",
        "/api/jobs/",
        json.dumps({"submission_id": submission.pk}).encode(),
        **{
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "X-Request-ID": "trace-obs-7",
        },
    )
    assert status == HTTPStatus.CREATED, body
    assert headers["X-Request-ID"] == "trace-obs-7"
    job_id = json.loads(body)["job_id"]
    wait_for(
        lambda: Job.objects.get(pk=job_id).status == JobStatus.COMPLETED, 60, "the job to finish"
    )
    assert Job.objects.get(pk=job_id).request_id == "trace-obs-7"
    stop(worker)
    stop(web)

    web_lines = json_lines(tmp_path / "web.log")  # every line is one JSON object
    access = [
        line
        for line in web_lines
        if line.get("logger") == "yoyaku.request" and line.get("request_id") == "trace-obs-7"
    ]
    assert len(access) == 1
    assert access[0]["message"].startswith("POST /api/jobs/ 201 ")
    assert (access[0]["job_id"], access[0]["user_id"]) == (job_id, str(user.pk))

    worker_lines = json_lines(tmp_path / "worker.log")
    about_job = [line for line in worker_lines if line.get("job_id") == job_id]
    assert len(about_job) >= 2  # the grading's result and its end
    assert {line["request_id"] for line in about_job} == {"trace-obs-7"}
    assert {line["submission_id"] for line in about_job} == {submission.pk}
    assert any(line["message"] == f"grading: job {job_id}: completed" for line in about_job)
