"""Who is a reviewer: the one place that names the permission (SPEC §5: users with
`review.can_review`). Everything that needs to know asks `user_is_reviewer`: the API's role
permissions (`apps.core.api.base.IsReviewer`, the one gate of the review API), the review page,
the reader rule, token scopes and the templates (`tests/core/test_api_base.py` proves no other
code names the permission)."""

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
    return user_has_permission(user, REVIEWER_PERMISSION)


def user_has_permission(user: AbstractBaseUser | AnonymousUser | None, permission: str) -> bool:
    """True for an authenticated user holding `permission` ("app_label.codename"); the one
    place a user's permissions are asked, for the reviewer role and for others alike."""
    if user is None or not user.is_authenticated:
        return False
    has_perm: Any = getattr(user, "has_perm", None)
    return bool(has_perm is not None and has_perm(permission))


def reviewer_permission() -> Permission | None:
    """The permission row (to grant it), or None before the review app's migrations ran."""
    return Permission.objects.filter(
        content_type__app_label=REVIEWER_APP_LABEL, codename=REVIEWER_CODENAME
    ).first()
