"""A chain renews the lease of the item it scores on one thread for all its items
(`rescore_takes.Renewer`): the watched lease is renewed while the scorer runs, no longer once
the chain unwatches it (a scored or given-back item lets its lease expire), never when it is
no longer the chain's, and the thread ends with the chain."""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import pytest

from apps.benchmarks.models import Entry, RescoreItem
from apps.benchmarks.services.rescore_takes import Renewer
from apps.benchmarks.services.rescoring import _item_take
from apps.submissions.models import Submission, SubmissionStatus
from tests.benchmarks.rescoring import new_scorer
from tests.benchmarks.scoring import apply_bundle, host_user, phase_draft, phase_of
from tests.factories.users import make_user
from tests.processes import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _expires(item_id: int) -> dt.datetime:
    expires = RescoreItem.objects.get(pk=item_id).lease_expires_at
    assert expires is not None
    return expires


def _renewers() -> int:
    return sum(thread.name == "rescore-renew" for thread in threading.enumerate())


def test_one_thread_renews_the_watched_lease_only(settings: Any) -> None:
    host = host_user()
    dev = phase_of(apply_bundle(host), "dev")
    for name in ("ann", "ben", "cat"):
        phase_draft(make_user(username=name), dev, {"p.csv": b"id,label\n"})
    Entry.objects.update(counted=True)
    Submission.objects.update(status=SubmissionStatus.COMPLETED)
    new_scorer(host)
    settings.GRADING_TIMEOUT = 1  # a lease of 2 s, renewed every 2/3 s (after the bundles)
    rescore_id = RescoreItem.objects.filter(rescore__phase=dev).values_list(
        "rescore_id", flat=True
    )[0]
    renewer = Renewer()
    try:
        first = _item_take(rescore_id=rescore_id)
        assert first is not None
        assert not isinstance(first, str)
        taken_until = _expires(first.item_id)
        renewer.watch(first.item_id, first.token)
        wait_for(lambda: _expires(first.item_id) > taken_until, 10, "the lease's renewal")
        renewer.unwatch()
        unwatched = _expires(first.item_id)
        time.sleep(1.5)  # two renewal periods
        assert _expires(first.item_id) == unwatched  # scored: its lease is left to expire

        second = _item_take(rescore_id=rescore_id)
        assert second is not None
        assert not isinstance(second, str)
        renewer.watch(second.item_id, second.token)
        wait_for(lambda: _expires(second.item_id) > unwatched, 10, "the next lease's renewal")
        RescoreItem.objects.filter(pk=second.item_id).update(lease_token="another-chain")
        lost = _expires(second.item_id)
        time.sleep(1.5)
        assert _expires(second.item_id) == lost  # no longer the chain's: left alone
        renewer.unwatch()
        assert _renewers() == 1  # one thread for the chain's items
    finally:
        renewer.close()
    assert _renewers() == 0
