"""Task topics for POST /api/schedule/tasks/: `topic` → handler run once on a worker.

A handler takes `(user, content)`; its validator checks `content` at request time and returns
the field errors (empty = valid).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

Handler = Callable[[AbstractBaseUser, dict[str, Any]], Any]
Validator = Callable[[dict[str, Any]], dict[str, list[str]]]


@dataclass(frozen=True)
class Topic:
    name: str
    description: str
    handler: Handler
    validate: Validator


_TOPICS: dict[str, Topic] = {}


def register_topic(topic: Topic) -> None:
    _TOPICS[topic.name] = topic


def topic_get(name: str) -> Topic | None:
    return _TOPICS.get(name)


def topic_names() -> list[str]:
    return sorted(_TOPICS)


def _positive_concurrent(content: dict[str, Any]) -> dict[str, list[str]]:
    value = content.get("concurrent")
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
        return {"content.concurrent": ["Must be an integer from 1 to 1000."]}
    return {}


def _quota_boost(user: AbstractBaseUser, content: dict[str, Any]) -> Any:
    from apps.quotas.services import quota_policy_adjust

    return quota_policy_adjust(user=user, concurrent_delta=int(content["concurrent"]))


def _quota_restore(user: AbstractBaseUser, content: dict[str, Any]) -> Any:
    from apps.quotas.services import quota_policy_adjust

    return quota_policy_adjust(user=user, concurrent_delta=-int(content["concurrent"]))


register_topic(
    Topic(
        "quota.boost",
        "Raise the caller's concurrent-job limit by content.concurrent (a term Life's birth).",
        _quota_boost,
        _positive_concurrent,
    )
)
register_topic(
    Topic(
        "quota.restore",
        "Lower it back by content.concurrent (the term Life's death).",
        _quota_restore,
        _positive_concurrent,
    )
)
