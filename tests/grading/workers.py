"""Hostile programs graded by the two kinds of worker: root through `grade_job` (the real
worker path), and an unprivileged uid through the isolation package's own command. Each program
reports what it managed to do on a `REPORT` line of its logs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User

from apps.grading.tasks import grade_job
from tests.factories.jobs import make_job
from tests.factories.submissions import make_stored_submission

ROOT = Path(settings.BASE_DIR)
UNPRIVILEGED_UID = 61234
REPORT = """
import json
def report(found, **extra):
    print("REPORT " + json.dumps({"found": found, **extra}), flush=True)
"""
GOOD = "open('metrics.json', 'w').write('{\"score\": 2}')\nreport([])\n"


def read_report(logs: str) -> dict[str, Any]:
    for line in logs.splitlines():
        if line.startswith("REPORT "):
            report: dict[str, Any] = json.loads(line[len("REPORT ") :])
            return report
    raise AssertionError(f"the program did not report:\n{logs[-2000:]}")


Grade = Callable[..., tuple[str, str]]


def grade_as_root_worker(user: User, program: str, config: dict[str, Any]) -> tuple[str, str]:
    submission = make_stored_submission(
        user, program=REPORT + textwrap.dedent(program), config=json.dumps(config).encode()
    )
    job = make_job(submission)
    grade_job(job.pk)
    submission.refresh_from_db()
    job.refresh_from_db()
    return submission.status, job.logs


def grade_as_unprivileged_worker(program: str, config: dict[str, Any]) -> tuple[str, str]:
    """The same sandbox run by a worker whose uid is not root: the isolation package's own
    command (`python -m apps.grading.isolation run`), as that uid, with the system Python."""
    files = Path(tempfile.mkdtemp(prefix="yoyaku-test-files-"))
    try:
        (files / "main.py").write_text(REPORT + textwrap.dedent(program))
        (files / "config.yaml").write_text(json.dumps(config))
        for path in [files, *files.iterdir()]:
            path.chmod(0o755)
        limits = {
            "wall_seconds": float(settings.GRADING_TIMEOUT),
            "cpu_seconds": int(settings.GRADING_TIMEOUT),
            "memory_bytes": int(settings.GRADING_MEMORY_LIMIT),
            "file_bytes": int(settings.GRADING_SCRATCH_SIZE),
            "scratch_bytes": int(settings.GRADING_SCRATCH_SIZE),
            "output_bytes": int(settings.GRADING_MAX_OUTPUT),
        }
        completed = subprocess.run(
            [
                "/usr/bin/python3",
                "-m",
                "apps.grading.isolation",
                "run",
                f"--files={files}",
                f"--limits={json.dumps(limits)}",
                "--",
                "main.py",
                "config.yaml",
            ],
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT), "YOYAKU_TEST_SECRET": os.environ["YOYAKU_TEST_SECRET"]},
            user=UNPRIVILEGED_UID,
            group=UNPRIVILEGED_UID,
            extra_groups=[],
            capture_output=True,
            timeout=60,
            check=True,
        )
    finally:
        shutil.rmtree(files, ignore_errors=True)
    outcome = json.loads(completed.stdout)
    ok = outcome["exit_code"] == 0 and not (
        outcome["error"] or outcome["timed_out"] or outcome["metrics_problem"]
    )
    return ("completed" if ok else "failed"), outcome["logs"]
