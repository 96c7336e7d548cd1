"""Schedule API: one small view per operation (SPEC §6)."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.base import ApiView
from apps.core.api.schema import error_responses
from apps.schedule import selectors
from apps.schedule.api.serializers import (
    LifeChangeInputSerializer,
    LifeCreateInputSerializer,
    LifeDetailOutputSerializer,
    LifeListFilterSerializer,
    LifeOutputSerializer,
    TaskInputSerializer,
    TaskOutputSerializer,
)
from apps.schedule.authentication import LIFE_HEADER
from apps.schedule.booking import life_spec_build
from apps.schedule.exceptions import InvalidSchedule
from apps.schedule.models import Plan
from apps.schedule.services.booking import life_book
from apps.schedule.services.lives import life_cancel, life_change
from apps.schedule.task_runs import task_run_create
from apps.schedule.topics import topic_get

_400 = "`invalid_schedule` with `fields` (bad type, time, action, host, term length)."
_409_CREATE = "`resource_conflict` (overlapping Life of the resource) or `life_exists`."


def _actions_scope_require(view: ApiView, data: dict[str, Any]) -> None:
    """A token books only the calls it could make itself: each action's target view's scope
    (a Life's calls later run as its owner without the token)."""
    for kind in ("birth", "death"):
        action = data.get(kind) or data.get(f"{kind}_action")
        if isinstance(action, dict):
            view.scope_require_for_call(
                method=str(action.get("method") or "POST"),
                path=str(action.get("path") or ""),
                body=action.get("body"),
            )


def booking_token_id(view: ApiView) -> str | None:
    """The API token a booking or change made through `view` carries: the request's own, or
    for the platform's self-call the token that booked the calling Life (a Life booked by a
    Life stays bound to the first token). None for a session or a password."""
    if view.token is not None:
        return str(view.token.pk)
    auth = view.request.auth
    return auth.life.booking_token_id if isinstance(auth, Plan) else None


class LifeListCreateApi(ApiView):
    invalid_input_error = InvalidSchedule

    @extend_schema(
        operation_id="schedules_list",
        parameters=[LifeListFilterSerializer],
        responses={200: LifeOutputSerializer(many=True), **error_responses(400)},
    )
    def get(self, request: Request) -> Response:
        filters = self.query(LifeListFilterSerializer)
        lives = selectors.life_list(user=self.user, **filters)
        return self.respond(LifeOutputSerializer, lives, many=True)

    @extend_schema(
        operation_id="schedules_create",
        request=LifeCreateInputSerializer,
        responses={
            201: LifeDetailOutputSerializer,
            200: LifeDetailOutputSerializer,
            **error_responses(
                400,
                406,
                409,
                415,
                429,
                _400=_400,
                _409=_409_CREATE,
                _429="`too_many_lives`: SCHEDULE_MAX_LIVES_PER_USER unfinished Lives.",
            ),
        },
    )
    def post(self, request: Request) -> Response:
        data = self.body(LifeCreateInputSerializer)
        spec = life_spec_build(data)
        _actions_scope_require(self, {"birth": spec.birth_action, "death": spec.death_action})
        result = life_book(
            user=self.user,
            spec=spec,
            life_uuid=data.get("life_uuid"),
            booking_token_id=booking_token_id(self),
        )
        life = selectors.life_detail(life_uuid=result.life.life_uuid, user=self.user)
        status = HTTPStatus.CREATED if result.created else HTTPStatus.OK
        return self.respond(LifeDetailOutputSerializer, life, status=status)


class LifeDetailApi(ApiView):
    invalid_input_error = InvalidSchedule

    @extend_schema(
        operation_id="schedules_retrieve",
        responses={200: LifeDetailOutputSerializer, **error_responses(403, 404)},
    )
    def get(self, request: Request, life_uuid: str) -> Response:
        life = selectors.life_detail(life_uuid=life_uuid, user=self.user)
        return self.respond(LifeDetailOutputSerializer, life)

    @extend_schema(
        operation_id="schedules_change",
        request=LifeChangeInputSerializer,
        responses={
            200: LifeDetailOutputSerializer,
            **error_responses(
                400,
                403,
                404,
                406,
                409,
                415,
                _400=_400 + " A field other than times and actions: `invalid_schedule`.",
                _409="`resource_conflict`, or `plan_started` (only plans not yet started change).",
            ),
        },
    )
    def patch(self, request: Request, life_uuid: str) -> Response:
        data = self.body(LifeChangeInputSerializer)
        _actions_scope_require(self, data)
        life_change(
            user=self.user,
            life_uuid=life_uuid,
            data=data,
            booking_token_id=booking_token_id(self),
        )
        life = selectors.life_detail(life_uuid=life_uuid, user=self.user)
        return self.respond(LifeDetailOutputSerializer, life)

    @extend_schema(
        operation_id="schedules_cancel",
        responses={
            200: LifeDetailOutputSerializer,
            **error_responses(
                403,
                404,
                409,
                _409="`invalid_transition` (already Dead) or `plan_started` (birth running).",
            ),
        },
    )
    def delete(self, request: Request, life_uuid: str) -> Response:
        life_cancel(life_uuid=life_uuid, user=self.user)
        life = selectors.life_detail(life_uuid=life_uuid, user=self.user)
        return self.respond(LifeDetailOutputSerializer, life)


class TaskCreateApi(ApiView):
    @classmethod
    def scope_for(cls, method: str, body: Any = None) -> str | None:
        """The topic's scope (`admin` for a staff-only topic), `submit` otherwise."""
        if isinstance(body, str | bytes):
            try:
                body = json.loads(body)
            except (ValueError, RecursionError):
                body = None
        topic = topic_get(str(body.get("topic"))) if isinstance(body, dict) else None
        return topic.scope if topic is not None else super().scope_for(method, body)

    @extend_schema(
        operation_id="schedule_tasks_create",
        request=TaskInputSerializer,
        parameters=[
            OpenApiParameter(LIFE_HEADER, str, OpenApiParameter.HEADER, required=False),
        ],
        responses={
            202: TaskOutputSerializer,
            200: TaskOutputSerializer,
            **error_responses(
                400,
                403,
                415,
                _400="`invalid_request`, or `unknown_topic` with `fields`.",
                _403="`permission_denied`: the topic is not open to this user (staff-only).",
            ),
        },
    )
    def post(self, request: Request) -> Response:
        data = self.body(TaskInputSerializer)
        self.scope_require(self.scope_for("POST", data) or "submit")
        key = request.auth.webhook_id if isinstance(request.auth, Plan) else None
        result = task_run_create(
            user=self.user, topic=data["topic"], content=data["content"], key=key
        )
        status = HTTPStatus.ACCEPTED if result.created else HTTPStatus.OK
        return self.respond(TaskOutputSerializer, result.task_run, status=status)
