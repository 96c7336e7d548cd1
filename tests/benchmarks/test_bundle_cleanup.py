"""Cleanup kind `orphan_bundles`: stored bundles that no challenge or scoring version names are
deleted once older than the grace; the bundles rows name stay, on local storage and on S3."""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management import call_command
from django.utils import timezone

from apps.benchmarks.models import Challenge, ScoringVersion
from apps.core.cleanup import cleanup_run
from tests.benchmarks.bundles import bundle
from tests.benchmarks.conftest import Apply
from tests.benchmarks.storage_support import (
    s3_bucket,  # noqa: F401 - fixture
    s3_endpoint,  # noqa: F401 - fixture
    stored_bundles,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _names_in_rows() -> set[str]:
    return set(Challenge.objects.values_list("bundle_file", flat=True)) | set(
        ScoringVersion.objects.values_list("bundle_file", flat=True)
    )


# A second reference folder: a bundle naming it changes every phase's reference data.
SECOND_REFERENCE = {"data/ref2/labels.csv": b"id,label,split\ns0,1,public\n"}


def _new_reference(document: dict[str, Any]) -> None:
    for phase in document["phases"]:
        phase["reference_data"] = "data/ref2/"


def _drop_code_phase(document: dict[str, Any]) -> None:
    document["phases"] = [p for p in document["phases"] if p["slug"] != "code"]


def _cleanup(*args: str) -> str:
    out = io.StringIO()
    call_command("cleanup", "--only", "orphan_bundles", *args, stdout=out)
    return out.getvalue()


def _sweep_scenario(host: User, apply_as: Callable[[User], Apply], settings: Any) -> None:
    apply = apply_as(host)
    assert apply(bundle()).status_code == HTTPStatus.CREATED
    # New reference data: version 2 of both phases; the first bundle stays, named by version 1.
    assert apply(bundle(_new_reference, extra=SECOND_REFERENCE)).status_code == HTTPStatus.OK
    live = _names_in_rows()
    assert len(live) == 2
    assert stored_bundles() == live

    storage = storages["default"]
    killed = storage.save(f"bundles/digits/{'a' * 32}/bundle.zip", ContentFile(b"PK killed"))
    never_created = storage.save(f"bundles/other/{'b' * 32}/bundle.zip", ContentFile(b"PK"))
    assert stored_bundles() == live | {killed, never_created}

    assert "orphan_bundles: removed 0" in _cleanup()  # within the grace: an apply in flight
    later = timezone.now() + dt.timedelta(minutes=settings.STORED_ORPHAN_GRACE_MINUTES + 1)
    preview = cleanup_run(only=["orphan_bundles"], dry_run=True, now=later)[0]
    assert sorted(preview.items) == sorted([killed, never_created])
    assert stored_bundles() == live | {killed, never_created}

    (report,) = cleanup_run(only=["orphan_bundles"], now=later)
    assert report.count == 2
    assert stored_bundles() == live
    assert cleanup_run(only=["orphan_bundles"], now=later)[0].count == 0


def test_unnamed_bundles_go_after_the_grace_and_named_ones_stay(
    host: User, apply_as: Callable[[User], Apply], settings: Any
) -> None:
    _sweep_scenario(host, apply_as, settings)


@pytest.mark.usefixtures("s3_bucket")
def test_unnamed_bundles_go_after_the_grace_and_named_ones_stay_on_s3(
    host: User, apply_as: Callable[[User], Apply], settings: Any
) -> None:
    _sweep_scenario(host, apply_as, settings)


def test_a_bundle_only_a_removed_phase_named_is_swept_and_no_other(
    host: User, apply_as: Callable[[User], Apply], settings: Any
) -> None:
    """Version 2 of `code` names the second bundle; a later bundle removes `code`, and with it
    the only row naming that bundle. The apply deletes only the bundle it replaces, so the
    second one is the sweep's; the first stays, named by `dev`'s version 1."""
    apply = apply_as(host)

    def code_reference(folder: str) -> Callable[[dict[str, Any]], None]:
        def change(document: dict[str, Any]) -> None:
            document["phases"][1]["reference_data"] = folder

        return change

    assert apply(bundle()).status_code == HTTPStatus.CREATED
    first = Challenge.objects.get().bundle_file
    assert (
        apply(bundle(code_reference("data/ref2/"), extra=SECOND_REFERENCE)).status_code
        == HTTPStatus.OK
    )
    second = Challenge.objects.get().bundle_file
    assert (
        apply(bundle(code_reference("data/ref3/"), extra={"data/ref3/l.csv": b"id\n"})).status_code
        == HTTPStatus.OK
    )
    assert apply(bundle(_drop_code_phase)).status_code == HTTPStatus.OK
    current = Challenge.objects.get().bundle_file
    assert _names_in_rows() == {first, current}
    assert stored_bundles() == {first, second, current}

    later = timezone.now() + dt.timedelta(minutes=settings.STORED_ORPHAN_GRACE_MINUTES + 1)
    (report,) = cleanup_run(only=["orphan_bundles"], now=later)
    assert report.items == [second]
    assert stored_bundles() == {first, current}
