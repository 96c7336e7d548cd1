"""Applying a bundle that arrived as a resumable upload (SPEC §11.1, §11.5)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from apps.benchmarks.exceptions import InvalidBundle
from apps.benchmarks.services.apply import ApplyResult, challenge_apply
from apps.submissions.resumable.consume import upload_consume, upload_source


def challenge_apply_upload(
    *, user: AbstractBaseUser, upload_id: str, dry_run: bool = False
) -> ApplyResult:
    """`challenge_apply` on the user's finished upload. The bundle is bounded by
    MAX_BUNDLE_SIZE whichever way it arrives (InvalidBundle). Once applied (not on a dry
    run) the upload is consumed: the apply stored its own copy, so the upload's bytes go.
    Raises what `challenge_apply` raises, and NotFound, UploadIncomplete, UploadAttached."""
    source = upload_source(user=user, upload_id=upload_id)
    limit = int(settings.MAX_BUNDLE_SIZE)
    if source.size > limit:
        raise InvalidBundle(
            f"The bundle is larger than MAX_BUNDLE_SIZE ({limit} bytes).",
            fields={"upload_id": [f"must be at most {limit} bytes"]},
        )
    result = challenge_apply(
        user=user, bundle_path=source.path, sha256=source.sha256, dry_run=dry_run
    )
    if not result.dry_run:
        upload_consume(user=user, upload_id=upload_id)
    return result
