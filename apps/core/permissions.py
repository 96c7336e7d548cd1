"""Who is a reviewer: the one place that names the permission (SPEC §5: users with
`review.can_review`). API views, services, the review page, the admin and the templates ask here."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Permission

from apps.core.exceptions import PermissionDenied

REVIEWER_APP_LABEL = "review"
REVIEWER_CODENAME = "can_review"
REVIEWER_PERMISSION = f"{REVIEWER_APP_LABEL}.{REVIEWER_CODENAME}"


class NotReviewer(PermissionDenied):
    default_message = f"Only reviewers (permission {REVIEWER_PERMISSION}) may do this."


def user_is_reviewer(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    """True for an authenticated user holding the reviewer permission (superusers hold all)."""
    if user is None or not user.is_authenticated:
        return False
    has_perm: Any = getattr(user, "has_perm", None)
    return bool(has_perm is not None and has_perm(REVIEWER_PERMISSION))


def reviewer_permission() -> Permission | None:
    """The permission row (to grant it), or None before the review app's migrations ran."""
    return Permission.objects.filter(
        content_type__app_label=REVIEWER_APP_LABEL, codename=REVIEWER_CODENAME
    ).first()


def reviewer_require(user: AbstractBaseUser | AnonymousUser | None) -> None:
    """NotReviewer (403 `permission_denied`) unless `user` is a reviewer."""
    if not user_is_reviewer(user):
        raise NotReviewer()
