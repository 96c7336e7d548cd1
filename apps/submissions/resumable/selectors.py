"""Reads of resumable uploads."""

from __future__ import annotations

import datetime as dt

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.utils import timezone

from apps.core.exceptions import NotFound
from apps.core.validation import contains_nul
from apps.submissions.models import ResumableUpload


def upload_get(
    *, upload_id: str, user: AbstractBaseUser | AnonymousUser, live_only: bool = True
) -> ResumableUpload:
    """The user's upload. Another user's, an unknown one and (with `live_only`) an expired one
    not attached are all NotFound: an upload id is never evidence that an upload exists."""
    if contains_nul(upload_id):
        raise NotFound("Upload not found.")
    upload = ResumableUpload.objects.filter(pk=upload_id, owner_id=user.pk).first()
    if upload is None:
        raise NotFound(f"Upload {upload_id} not found.")
    if live_only and upload.attached_at is None and upload.expires_at <= timezone.now():
        raise NotFound(f"Upload {upload_id} expired.")
    return upload


def upload_expired_ids(*, now: dt.datetime) -> list[str]:
    return list(
        ResumableUpload.objects.filter(attached_at__isnull=True, expires_at__lte=now)
        .order_by("expires_at", "id")
        .values_list("id", flat=True)
    )


def upload_open_count(*, user_id: int, now: dt.datetime) -> int:
    """The user's uploads neither attached nor expired."""
    return ResumableUpload.objects.filter(
        owner_id=user_id, attached_at__isnull=True, expires_at__gt=now
    ).count()
