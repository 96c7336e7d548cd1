"""Who may read a submission, asked by apps that may not import the app that decides it.

The rule is the review app's (`apps.review.access`: it is made of claims and verdicts); the
submissions and jobs views ask through here, and the review app registers the rule when it
loads (`ReviewConfig.ready`). Until then every read of someone else's object is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from apps.core.exceptions import PermissionDenied

#: The scope a token needs to read someone else's submission (as a reviewer or staff).
READER_SCOPE = "review"

_rules: dict[str, Callable[..., Any]] = {}


def readers_register(*, submission: Callable[..., Any], job: Callable[..., Any]) -> None:
    _rules["submission"] = submission
    _rules["job"] = job


def submission_get_readable(*, submission_id: str, user: AbstractBaseUser) -> Any:
    """A `Readable` (`.submission`, `.as_owner`); NotFound, PermissionDenied (403)."""
    rule = _rules.get("submission")
    if rule is None:
        raise PermissionDenied("Reading submissions is not available.")
    return rule(submission_id=submission_id, user=user)


def job_get_readable(*, job_id: str, user: AbstractBaseUser) -> tuple[Any, Any]:
    """(job, `Readable` of its submission); NotFound, PermissionDenied (403)."""
    rule = _rules.get("job")
    if rule is None:
        raise PermissionDenied("Reading jobs is not available.")
    result: tuple[Any, Any] = rule(job_id=job_id, user=user)
    return result
