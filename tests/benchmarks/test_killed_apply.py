"""A real web process (gunicorn, as production runs it) is killed (SIGKILL) while it applies a
large bundle, after the bundle is stored and before its transaction commits: the stored bundle
is an orphan no row names. The cleanup deletes it once older than the grace, keeps the bundles
rows name, and keeps the young bundle of an apply still in flight, which then commits with it.
On local storage and on S3 (moto's server), on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import threading
import uuid
from collections.abc import Callable, Iterator
from http import HTTPStatus
from typing import Any

import pytest
from django.core.files.storage import storages
from django.db import transaction
from django.utils import timezone

from apps.benchmarks.models import Challenge, ScoringVersion
from apps.core.cleanup import cleanup_run
from apps.core.models import ApiToken
from tests.benchmarks.bundles import bundle, grant_add_challenge
from tests.benchmarks.storage_support import (
    big_bundle,
    post_bundle,
    s3_bucket,  # noqa: F401 - fixture
    s3_endpoint,  # noqa: F401 - fixture
    s3_env,
    stored_bundles,
)
from tests.factories.tokens import make_token
from tests.factories.users import make_user
from tests.processes import Start, start_gunicorn, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

REFERENCE_BYTES = 48 * 1024 * 1024


@pytest.fixture(params=["local", "s3"])
def web_env(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The environment of the web processes: local storage (the test's media folder) or the
    test's S3 bucket."""
    if request.param == "local":
        yield {}
    else:
        bucket = request.getfixturevalue("s3_bucket")
        yield s3_env(request.getfixturevalue("s3_endpoint"), bucket)


class Apply(threading.Thread):
    """A bundle POSTed to a real server in a thread; `status` once it ends (None when the
    connection broke: the server was killed)."""

    def __init__(self, port: int, token: str, data: bytes) -> None:
        super().__init__(daemon=True)
        self.args_ = (port, token, data)
        self.status: int | None = None
        self.body: dict[str, Any] = {}

    def run(self) -> None:
        try:
            self.status, raw = post_bundle(*self.args_)
            self.body = json.loads(raw or b"{}")
        except OSError:
            self.status = None


def _stored_whole(before: set[str], size: int) -> Callable[[], str | None]:
    """The one new stored bundle once all `size` bytes of it are stored, else None."""

    def found() -> str | None:
        new = stored_bundles() - before
        if len(new) != 1:
            return None
        (name,) = new
        return name if storages["default"].size(name) == size else None

    return found


def _stored_after(found: Callable[[], str | None]) -> str:
    wait_for(lambda: found() is not None, 120, "the bundle to be stored whole")
    name = found()
    assert name is not None
    return name


def _blocked_apply(port: int, token: str, data: bytes) -> tuple[Apply, str]:
    """Start an apply of `data` while the caller holds the challenge's row lock; return it
    with its stored name once the bundle is stored whole (the apply then waits for the lock,
    before its transaction writes anything)."""
    Challenge.objects.select_for_update().get(slug="digits")
    ApiToken.objects.update(last_used_at=timezone.now())  # no token write before the store
    before = stored_bundles()
    apply = Apply(port, token, data)
    apply.start()
    return apply, _stored_after(_stored_whole(before, len(data)))


def _named() -> set[str]:
    return set(Challenge.objects.values_list("bundle_file", flat=True)) | set(
        ScoringVersion.objects.values_list("bundle_file", flat=True)
    )


def test_bundle_of_a_killed_apply_is_swept_live_and_in_flight_ones_stay(
    start_process: Start, web_env: dict[str, str], settings: Any
) -> None:
    host = grant_add_challenge(make_user(username="alice"))
    token = make_token(host)
    port, web = start_gunicorn(start_process, "web", 1, **web_env)

    def changed(document: dict[str, Any]) -> None:
        document["phases"][0]["reference_data"] = "data/ref2/"

    assert post_bundle(port, token, bundle())[0] == HTTPStatus.CREATED
    assert (
        post_bundle(port, token, bundle(changed, extra={"data/ref2/labels.csv": b"id\n"}))[0]
        == HTTPStatus.OK
    )
    live = _named()
    assert len(live) == 2
    assert stored_bundles() == live

    killed_data = big_bundle(REFERENCE_BYTES, label=uuid.uuid4().hex)
    with transaction.atomic():
        killed, orphan = _blocked_apply(port, token, killed_data)
        os.killpg(web.pid, signal.SIGKILL)
        web.wait(10)
        killed.join(30)
    assert web.returncode == -signal.SIGKILL
    assert killed.status is None
    assert _named() == live
    assert stored_bundles() == live | {orphan}

    port, _ = start_gunicorn(start_process, "web-again", 1, **web_env)
    in_flight_data = big_bundle(REFERENCE_BYTES, label=uuid.uuid4().hex)
    storage = storages["default"]
    with transaction.atomic():
        in_flight, young = _blocked_apply(port, token, in_flight_data)
        # Nothing goes within the grace, not even the killed apply's bundle.
        assert cleanup_run(only=["orphan_bundles"])[0].count == 0
        # Once the killed apply's bundle is past the grace and the one in flight is not.
        assert storage.get_modified_time(orphan) < storage.get_modified_time(young)
        grace = dt.timedelta(minutes=float(settings.STORED_ORPHAN_GRACE_MINUTES))
        (report,) = cleanup_run(
            only=["orphan_bundles"], now=storage.get_modified_time(orphan) + grace
        )
        assert report.items == [orphan]
        assert stored_bundles() == live | {young}
    in_flight.join(60)

    assert in_flight.status == HTTPStatus.OK, in_flight.body
    challenge = Challenge.objects.get()
    assert challenge.bundle_file == young
    assert challenge.bundle_version == 3
    assert stored_bundles() == _named() == live | {young}
    assert storage.size(young) == len(in_flight_data)
