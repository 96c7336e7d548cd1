"""What hosts (and staff) read of a phase's submissions (SPEC §11.3): every submission with
both stages' logs, every split's scores, `counted`, `refund_reason` and `failure`. Nothing here
is ever served to a participant."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from apps.benchmarks.board_selectors import BoardAccess
from apps.benchmarks.models import Entry, Score
from apps.core.exceptions import PermissionDenied
from apps.jobs.models import Job


@dataclass(frozen=True)
class HostEntry:
    entry: Entry
    logs: str  # stage 1's (the job's), what the participant reads too
    scores: dict[str, dict[str, Any]]  # split -> metric -> value, in the version asked


def host_entry_list(*, access: BoardAccess) -> QuerySet[Entry]:
    """Every submission of the phase, newest first; PermissionDenied unless the caller is a
    host of the challenge or staff."""
    if not access.manage:
        raise PermissionDenied("Only the challenge's hosts (and staff) list its submissions.")
    return (
        Entry.objects.filter(phase=access.phase)
        .select_related("submission", "team", "user")
        .order_by("-created_at", "-submission_id")
    )


def host_entries_detail(*, entries: list[Entry], version: int) -> list[HostEntry]:
    """`entries` with their latest job's logs and their scores in `version` (two queries)."""
    ids = [entry.pk for entry in entries]
    logs: dict[str, str] = {}
    jobs = Job.objects.filter(submission_id__in=ids).order_by("submission_id", "-created_at", "-id")
    for submission_id, text in jobs.values_list("submission_id", "logs"):
        logs.setdefault(submission_id, text)
    scores: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    rows = Score.objects.filter(entry_id__in=ids, version=version).values_list(
        "entry_id", "split", "values"
    )
    for entry_id, split, values in rows:
        scores[entry_id][split] = dict(values)
    return [
        HostEntry(entry=entry, logs=logs.get(entry.pk, ""), scores=scores.get(entry.pk, {}))
        for entry in entries
    ]
