"""Rescore work that nobody carries on (its chain died with a cluster on the Redis broker) is
started again by the every-minute reaper, and only then; an item whose worker was lost
GRADING_MAX_ATTEMPTS times fails `worker_lost` instead of being taken again; a rescore starts
RESCORE_WORKERS chains."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from apps.benchmarks.models import Entry, RescoreItem
from apps.benchmarks.services.rescoring import _item_take, rescores_reap
from apps.core.queue import RESCORE_NEXT, TaskEnqueue
from apps.submissions.models import Submission, SubmissionStatus
from tests.benchmarks.rescoring import new_scorer
from tests.benchmarks.scoring import apply_bundle, host_user, phase_draft, phase_of
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db


def _chains(callbacks: Any) -> list[tuple[Any, ...]]:
    return [c.args for c in callbacks if isinstance(c, TaskEnqueue) and c.task == RESCORE_NEXT]


def test_lost_chains_are_restarted_and_a_worker_lost_too_often_fails_the_item(
    settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.RESCORE_WORKERS = 2
    settings.GRADING_MAX_ATTEMPTS = 2
    host = host_user()
    challenge = apply_bundle(host)
    dev = phase_of(challenge, "dev")
    for name in ("ann", "ben"):
        phase_draft(make_user(username=name), dev, {"p.csv": b"id,label\n"})
    Entry.objects.update(counted=True)
    Submission.objects.update(status=SubmissionStatus.COMPLETED)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        new_scorer(host)
    started = _chains(callbacks)
    items = RescoreItem.objects.filter(rescore__phase=dev)
    assert len(started) == 2
    assert len(set(started)) == 1
    assert items.count() == 3  # two entries and the baseline

    now = timezone.now()
    live = now + dt.timedelta(seconds=60)
    items.update(status="processing", lease_expires_at=live, attempts=1)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert rescores_reap(now=now) == 0  # a chain is working
    assert _chains(callbacks) == []

    items.update(lease_expires_at=now - dt.timedelta(minutes=30), finished_at=None)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert rescores_reap(now=now) == 1
    assert len(_chains(callbacks)) == 2

    first, *others = list(items.order_by("pk"))
    RescoreItem.objects.filter(pk=first.pk).update(attempts=2)  # lost twice already
    taken = _item_take(rescore_id=first.rescore_id)
    assert taken is not None
    assert not isinstance(taken, str)  # leased: no job check was asked
    assert taken.item_id == others[0].pk
    lost = RescoreItem.objects.get(pk=first.pk)
    assert (lost.status, lost.failure) == ("failed", "worker_lost")
    assert RescoreItem.objects.get(pk=taken.item_id).attempts == 2
