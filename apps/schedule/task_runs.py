"""Services of the task endpoint: who may call a topic (directly or from a Life), record a
topic call, run its handler once on a worker."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.core.exceptions import PermissionDenied
from apps.core.queue import TASK_RUN, enqueue_on_commit
from apps.core.validation import NUL_MESSAGE, contains_nul
from apps.schedule.exceptions import InvalidSchedule, UnknownTopic
from apps.schedule.models import TASK_RUN_TRANSITIONS, ScheduleType, TaskRun
from apps.schedule.targets import TargetRefused, route_name
from apps.schedule.topics import Topic, topic_get, topic_names

TASK_ROUTE = "schedule-task-create"  # the URL name of POST /api/schedule/tasks/


@dataclass(frozen=True)
class TaskRunResult:
    task_run: TaskRun
    created: bool


@dataclass(frozen=True)
class TopicCall:
    topic: str
    content: dict[str, Any]


def topic_call_check(*, user: AbstractBaseUser, topic: str, content: dict[str, Any]) -> Topic:
    """May `user` call `topic` with `content`? Returns the topic.

    Raises UnknownTopic (400, with `fields`) for an unknown topic, PermissionDenied (403) when
    the topic's `may_call` refuses the user, then UnknownTopic for content the topic refuses.
    """
    spec = topic_get(topic)
    if spec is None:
        raise UnknownTopic(
            f"Unknown topic {topic!r}; known: {', '.join(topic_names())}.",
            fields={"topic": [f"Must be one of: {', '.join(topic_names())}."]},
        )
    if not spec.may_call(user):
        raise PermissionDenied(f"You may not call the topic {topic!r}.")
    errors = spec.validate(content)
    if contains_nul(content):
        errors = {**errors, "content": [NUL_MESSAGE]}
    if errors:
        details = "; ".join(f"{name}: {msgs[0]}" for name, msgs in errors.items())
        raise UnknownTopic(f"Invalid content for {topic!r}: {details}", fields=errors)
    return spec


def action_topic_call(action: dict[str, Any]) -> TopicCall | None:
    """The topic call an action makes when it POSTs to the task endpoint, else None.

    Raises UnknownTopic when its body is not a `{"topic", "content"}` object (a JSON text
    body is read as JSON, the way the endpoint will read it)."""
    try:
        name = route_name(str(action.get("path", "")))
    except TargetRefused:
        return None  # refused by the target rules already
    if name != TASK_ROUTE or str(action.get("method", "")).upper() != "POST":
        return None
    body = action.get("body")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            body = None
    content = body.get("content", {}) if isinstance(body, dict) else None
    if not isinstance(body, dict) or not isinstance(body.get("topic"), str):
        raise UnknownTopic(
            'A call of the task endpoint needs a JSON body {"topic", "content"}.',
            fields={"topic": ["This field is required."]},
        )
    if not isinstance(content, dict):
        raise UnknownTopic("The task's content must be an object.", fields={"content": []})
    return TopicCall(topic=body["topic"], content=content)


def life_topic_calls_check(
    *,
    user: AbstractBaseUser,
    schedule_type: str,
    birth_action: dict[str, Any],
    death_action: dict[str, Any] | None,
) -> None:
    """Booking-time rules for a Life whose actions call task topics (booking and change).

    Each call must be one `user` may make now (PermissionDenied, 403) with valid content
    (InvalidSchedule, 400). A topic with `undone_by` (quota.boost) may only be a term Life's
    birth whose death calls `undone_by` with the same content (InvalidSchedule): a boost
    always ends. The endpoint checks the caller again when the Life fires, and the worker
    when the handler runs, so a user who lost the right meanwhile cannot run it either.
    """
    calls: dict[str, tuple[Topic, TopicCall]] = {}
    for kind, action in (("birth", birth_action), ("death", death_action)):
        if action is None:
            continue
        try:
            call = action_topic_call(action)
            if call is None:
                continue
            calls[kind] = (
                topic_call_check(user=user, topic=call.topic, content=call.content),
                call,
            )
        except UnknownTopic as exc:
            raise InvalidSchedule(
                f"{kind}_action: {exc.message}", fields={f"{kind}_action": [exc.message]}
            ) from exc
    death = calls.get("death")
    for kind, (spec, call) in calls.items():
        if spec.undone_by is None:
            continue
        paired = (
            kind == "birth"
            and schedule_type == ScheduleType.TERM
            and death is not None
            and death[1].topic == spec.undone_by
            and death[1].content == call.content
        )
        if not paired:
            message = (
                f"{spec.name} must be undone: book it as a term Life whose birth calls "
                f"{spec.name} and whose death calls {spec.undone_by} with the same content."
            )
            raise InvalidSchedule(message, fields={f"{kind}_action": [message]})


def life_death_undoes_birth(*, birth_action: dict[str, Any], death_action: Any) -> bool:
    """Whether a Life's death only undoes what its birth granted: the birth calls a topic with
    `undone_by` and the death calls that topic with the same content (`quota.restore` after
    `quota.boost`), the pairing `life_topic_calls_check` demands at booking."""
    if not isinstance(death_action, dict):
        return False
    try:
        birth, death = action_topic_call(birth_action), action_topic_call(death_action)
    except UnknownTopic:
        return False
    spec = topic_get(birth.topic) if birth is not None else None
    return (
        birth is not None
        and death is not None
        and spec is not None
        and spec.undone_by == death.topic
        and death.content == birth.content
    )


def task_run_create(
    *, user: AbstractBaseUser, topic: str, content: dict[str, Any], key: str | None = None
) -> TaskRunResult:
    """Record a call of `topic` and hand it to a worker after commit.

    Idempotent on `key` (a plan's `webhook-id`): a retried delivery returns the first TaskRun
    and enqueues nothing. Raises UnknownTopic (400), PermissionDenied (403) — see
    `topic_call_check`.
    """
    topic_call_check(user=user, topic=topic, content=content)
    if key:
        existing = TaskRun.objects.filter(key=key).first()
        if existing is not None:
            return _task_run_replay(existing)
    try:
        with transaction.atomic():
            run = TaskRun.objects.create(owner_id=user.pk, topic=topic, content=content, key=key)
            # Not robust: a refused enqueue fails the call (5xx), so the calling plan retries
            # with its webhook-id, and the replay below enqueues the still-pending run again.
            enqueue_on_commit(TASK_RUN, run.pk, robust=False)
    except IntegrityError:
        return _task_run_replay(TaskRun.objects.get(key=key))
    return TaskRunResult(run, created=True)


def _task_run_replay(run: TaskRun) -> TaskRunResult:
    """A repeated call (same key): the first TaskRun. One still pending is enqueued again, in
    case the first enqueue was lost; a duplicate delivery is a no-op (`task_run_execute`)."""
    if run.state == TaskRun.State.PENDING:
        enqueue_on_commit(TASK_RUN, run.pk, robust=False)
    return TaskRunResult(run, created=False)


def _task_run_move(run: TaskRun, *, to: str, **fields: Any) -> bool:
    """Compare-and-set a pending run to `to` (`TASK_RUN_TRANSITIONS`); False when it is no
    longer pending (another delivery got there first)."""
    rows = TaskRun.objects.filter(pk=run.pk)
    moved = TASK_RUN_TRANSITIONS.move(
        rows, old=TaskRun.State.PENDING, to=to, finished_at=timezone.now(), **fields
    )
    return moved == 1


def task_run_execute(*, task_run_id: int) -> str:
    """Run the handler exactly once: the pending → done compare-and-set and the handler's
    writes commit together, so a redelivery after success does nothing and a crash rolls both
    back (the broker delivers again). An owner the topic no longer admits fails the run."""
    run = TaskRun.objects.select_related("owner").filter(pk=task_run_id).first()
    if run is None or run.state != TaskRun.State.PENDING:
        return "skipped"
    spec = topic_get(run.topic)
    if spec is None:
        _task_run_move(run, to=TaskRun.State.FAILED, error="unknown topic")
        return "failed"
    if not spec.may_call(run.owner):
        # The owner lost the right since the call was accepted (e.g. no longer staff).
        _task_run_move(run, to=TaskRun.State.FAILED, error="permission denied")
        return "failed"
    with transaction.atomic():
        if not _task_run_move(run, to=TaskRun.State.DONE):
            return "skipped"
        spec.handler(run.owner, dict(run.content))
    return "done"


def task_run_execute_keyed(*, key: str) -> str:
    """Run now the call recorded under `key` (a plan's webhook-id) if it is still pending:
    `task_run_execute`, so at most once whoever else runs it."""
    run_id = TaskRun.objects.filter(key=key).values_list("pk", flat=True).first()
    return "skipped" if run_id is None else task_run_execute(task_run_id=run_id)
