"""Only `apps/submissions/services/leases.py` writes a submission's lease columns
(`lease_token`, `lease_expires_at`, `attempts`).

Read two ways: from the source (every write-shaped use of those names in the apps that may
import the submissions app, in the spirit of `test_app_dependencies.py`), and at run time (every
UPDATE of the submissions table that sets one of them, while the grading, jobs and review
services take, renew, give back, take over, end, exhaust, cancel and reset real leases). Each
check is shown to catch a planted violation.
"""

from __future__ import annotations

import ast
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.apps import apps as django_apps
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from apps.grading.grader import GradingResult
from apps.grading.leases import (
    grading_lease_acquire,
    grading_lease_give_back,
    grading_lease_renew,
    grading_lease_seconds,
    grading_result_record,
)
from apps.jobs.models import Job
from apps.jobs.services import job_cancel
from apps.review.services import submission_regrade
from apps.submissions.models import Submission
from tests.factories.jobs import make_job
from tests.factories.submissions import make_stored_submission
from tests.test_app_dependencies import ALLOWED

ROOT = Path(__file__).resolve().parent.parent
LEASE_MODULE = ROOT / "apps" / "submissions" / "services" / "leases.py"
LEASE_COLUMNS = frozenset({"lease_token", "lease_expires_at", "attempts"})
# Calls that write the keywords they are given: the ORM's, the transition table's, a model's
# constructor, and the submissions app's services.
_WRITES = frozenset(
    {"update", "create", "get_or_create", "update_or_create", "bulk_create", "move", "move_one"}
)


def _other_models_with_lease_columns() -> frozenset[str]:
    """Models other than Submission that have a column of the same name (a grading attempt's
    own `lease_token`): writes through their class are theirs."""
    return frozenset(
        model.__name__
        for model in django_apps.get_models()
        if model is not Submission
        and LEASE_COLUMNS & {field.name for field in model._meta.get_fields()}
    )


def _receiver_root(node: ast.expr) -> str | None:
    """`GradingAttempt` for `GradingAttempt.objects.filter(...).update`."""
    while True:
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        else:
            return node.id if isinstance(node, ast.Name) else None


def _names_a_column(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in LEASE_COLUMNS


def _call_writes(call: ast.Call, exempt: frozenset[str]) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        if func.id == "setattr":
            return len(call.args) > 1 and _names_a_column(call.args[1])
        writer = func.id == "Submission" or func.id.startswith("submission_")
    elif isinstance(func, ast.Attribute):
        writer = func.attr in _WRITES or func.attr == "save" or func.attr.startswith("submission_")
        writer = writer and _receiver_root(func) not in exempt
    else:
        writer = False
    return writer and any(map(_keyword_writes, call.keywords))


def _keyword_writes(keyword: ast.keyword) -> bool:
    if keyword.arg in LEASE_COLUMNS:
        return True
    if keyword.arg == "update_fields":
        return any(map(_names_a_column, ast.walk(keyword.value)))
    # `**{...}`, `defaults={...}`
    return isinstance(keyword.value, ast.Dict) and any(
        key is not None and _names_a_column(key) for key in keyword.value.keys
    )


def lease_writes(path: Path, exempt: frozenset[str]) -> list[int]:
    """Lines of `path` that write a lease column: a keyword of that name (or a dict key, in
    `**{...}` or `defaults={...}`) in a call that writes (`update`, `create`, `move`,
    `Submission(...)`, `submission_*` services), the name in `update_fields`, `setattr`, or an
    assignment to `<x>.<column>`. Calls on another model with a column of the same name
    (`exempt`) are left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_writes(node, exempt):
            lines.add(node.lineno)
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and any(
            isinstance(sub, ast.Attribute) and sub.attr in LEASE_COLUMNS
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            for sub in ast.walk(target)
        ):
            lines.add(node.lineno)
    return sorted(lines)


def _scanned_files() -> list[Path]:
    """Every source file of the apps that may import the submissions app (the others cannot
    name a submission: `test_app_dependencies.py`), migrations aside."""
    app_names = sorted(app for app, deps in ALLOWED.items() if "submissions" in deps)
    files = [
        path
        for app in ["submissions", *app_names]
        for path in sorted((ROOT / "apps" / app).rglob("*.py"))
        if "migrations" not in path.parts
    ]
    assert LEASE_MODULE in files
    return files


def test_only_the_lease_module_writes_lease_columns_in_the_source() -> None:
    exempt = _other_models_with_lease_columns()
    found = {
        str(path.relative_to(ROOT)): lines
        for path in _scanned_files()
        if path != LEASE_MODULE and (lines := lease_writes(path, exempt))
    }
    assert not found, f"lease columns written outside {LEASE_MODULE.relative_to(ROOT)}: {found}"
    assert lease_writes(LEASE_MODULE, exempt), "the scan no longer sees the lease module's writes"


def test_the_source_scan_catches_a_planted_write(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "def f(s, rows):\n"
        "    Submission.objects.filter(pk=s.pk).update(attempts=0)\n"  # 2
        "    s.lease_token = ''\n"  # 3
        "    SUBMISSION_TRANSITIONS.move_one(s, to='failed', lease_expires_at=None)\n"  # 4
        "    s.save(update_fields=['attempts'])\n"  # 5
        "    rows.update(**{'lease_token': ''})\n"  # 6
        "    setattr(s, 'attempts', 1)\n"  # 7
        "    s.attempts += 1\n"  # 8
        "    Submission(owner=s.owner, attempts=3).save()\n"  # 9
        "    Submission.objects.update_or_create(pk=1, defaults={'lease_token': ''})\n"  # 10
        "    submission_transition(submission=s, to='failed', lease_token='')\n"  # 11
        "    GradingAttempt.objects.create(lease_token='t')\n"  # the attempt's own column
        "    Submission.objects.filter(lease_token='t').exists()\n"  # a read
        "    Detail(attempts=[])\n"  # a field of another class
        "    return s.lease_token, s.attempts\n"  # reads
    )

    assert lease_writes(planted, frozenset({"GradingAttempt"})) == list(range(2, 12))


class _UpdateRecorder:
    """Every UPDATE of the submissions table that sets a lease column: the columns, and the
    lease module's function it ran in (None when it ran outside the module)."""

    def __init__(self) -> None:
        self.writes: list[tuple[frozenset[str], str | None]] = []
        quote = connection.ops.quote_name
        # Matched against, never run.
        self.prefix = f"UPDATE {quote(Submission._meta.db_table)} SET "  # noqa: S608
        self.columns = {column: quote(column) for column in LEASE_COLUMNS}

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        if sql.startswith(self.prefix):
            assignments = sql[len(self.prefix) :].split(" WHERE ", 1)[0]
            written = frozenset(c for c, quoted in self.columns.items() if quoted in assignments)
            if written:
                frames = traceback.extract_stack()
                inside = [f.name for f in frames if Path(f.filename) == LEASE_MODULE]
                self.writes.append((written, inside[-1] if inside else None))
        return execute(sql, params, many, context)

    def outside(self) -> list[frozenset[str]]:
        return [columns for columns, where in self.writes if where is None]


@contextmanager
def _recording() -> Iterator[_UpdateRecorder]:
    recorder = _UpdateRecorder()
    with connection.execute_wrapper(recorder):
        yield recorder


@pytest.mark.django_db
def test_every_lease_write_of_the_services_runs_in_the_lease_module(
    user: User, staff_user: User, settings: Any
) -> None:
    settings.GRADING_MAX_ATTEMPTS = 1
    graded, cancelled = make_stored_submission(user), make_stored_submission(user)
    expired = timezone.now() + timedelta(seconds=grading_lease_seconds() + 1)
    with _recording() as recorder:
        lease = grading_lease_acquire(job_id=make_job(graded).pk)
        assert lease is not None
        assert grading_lease_renew(lease=lease)
        assert grading_lease_give_back(lease=lease)
        lease = grading_lease_acquire(job_id=lease.job_id)  # takes over the given-back lease
        assert lease is not None
        assert lease.attempt == 1
        assert grading_result_record(lease=lease, result=GradingResult("completed", score=1))
        regraded = submission_regrade(user=staff_user, submission_id=graded.pk)
        assert grading_lease_acquire(job_id=regraded.job.pk) is not None
        with time_machine.travel(expired):
            assert grading_lease_acquire(job_id=regraded.job.pk) is None  # no attempt left
        job = make_job(cancelled)
        assert grading_lease_acquire(job_id=job.pk) is not None
        job_cancel(job_id=job.pk)

    assert recorder.outside() == []
    assert {where for _, where in recorder.writes} == {
        "submission_lease_take",
        "submission_lease_renew",
        "submission_lease_release",
        "submission_lease_take_over",
        "submission_lease_end",
        "submission_lease_reset",
        "submission_lease_exhausted",
        "submission_lease_cancel",
    }
    assert Job.objects.get(pk=regraded.job.pk).status == "failed"


@pytest.mark.django_db
def test_the_run_time_check_catches_a_planted_write(user: User) -> None:
    submission = make_stored_submission(user)

    with _recording() as recorder:
        Submission.objects.filter(pk=submission.pk).update(attempts=7)
        Submission.objects.filter(pk=submission.pk).update(status_reason="not a lease column")

    assert recorder.outside() == [frozenset({"attempts"})]
