"""Task topics for POST /api/schedule/tasks/: `topic` → handler run once on a worker.

Each topic declares who may call it (`may_call`, checked when the call is made, when a Life
whose action calls it is booked or changed, and again when its handler runs), validates its
`content` at request time (returns the field errors; empty = valid) and may name the topic
that undoes it (`undone_by`): such a topic may only be booked as a term Life's birth whose
death calls `undone_by` with the same content, so what it grants always ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from apps.core.scopes import Scope

Handler = Callable[[AbstractBaseUser, dict[str, Any]], Any]
Validator = Callable[[dict[str, Any]], dict[str, list[str]]]
Audience = Callable[[AbstractBaseUser], bool]


def anyone(user: AbstractBaseUser) -> bool:
    """Any active user may call the topic."""
    return bool(user.is_active)


def staff_only(user: AbstractBaseUser) -> bool:
    """Only active staff may call the topic."""
    return bool(user.is_active and getattr(user, "is_staff", False))


@dataclass(frozen=True, kw_only=True)
class Topic:
    name: str
    description: str
    handler: Handler
    validate: Validator
    may_call: Audience  # no default: every topic says who may call it
    #: The API token scope a call needs (`apps.core.scopes`): `admin` for staff-only topics.
    scope: str = Scope.SUBMIT.value
    undone_by: str | None = None


_TOPICS: dict[str, Topic] = {}


def register_topic(topic: Topic) -> None:
    _TOPICS[topic.name] = topic


def topic_get(name: str) -> Topic | None:
    return _TOPICS.get(name)


def topic_names() -> list[str]:
    return sorted(_TOPICS)


def _bounded_concurrent(content: dict[str, Any]) -> dict[str, list[str]]:
    value = content.get("concurrent")
    limit = int(settings.QUOTA_MAX_BOOST)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        return {"content.concurrent": [f"Must be an integer from 1 to QUOTA_MAX_BOOST ({limit})."]}
    return {}


def _quota_boost(user: AbstractBaseUser, content: dict[str, Any]) -> Any:
    from apps.quotas.services import quota_policy_adjust

    return quota_policy_adjust(user=user, concurrent_delta=int(content["concurrent"]))


def _quota_restore(user: AbstractBaseUser, content: dict[str, Any]) -> Any:
    from apps.quotas.services import quota_policy_adjust

    return quota_policy_adjust(user=user, concurrent_delta=-int(content["concurrent"]))


register_topic(
    Topic(
        name="quota.boost",
        description="Staff only. Raise the caller's concurrent-job limit by content.concurrent "
        "(at most QUOTA_MAX_BOOST) for a term: book it as a term Life's birth whose death "
        "calls quota.restore with the same content.",
        handler=_quota_boost,
        validate=_bounded_concurrent,
        may_call=staff_only,
        scope=Scope.ADMIN.value,
        undone_by="quota.restore",
    )
)
register_topic(
    Topic(
        name="quota.restore",
        description="Staff only. Lower it back by content.concurrent (the term Life's death).",
        handler=_quota_restore,
        validate=_bounded_concurrent,
        may_call=staff_only,
        scope=Scope.ADMIN.value,
    )
)
