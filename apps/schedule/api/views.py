"""Schedule API: one small view per operation (SPEC §6)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

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
from apps.schedule.services import life_book, life_cancel, life_change
from apps.schedule.task_runs import task_run_create

_400 = "`invalid_schedule` with `fields` (bad type, time, action, host, term length)."
_409_CREATE = "`resource_conflict` (overlapping Life of the resource) or `life_exists`."


def _validated(serializer_class: type[serializers.Serializer[Any]], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        fields = {
            str(name): [str(m) for m in (msgs if isinstance(msgs, list) else [msgs])]
            for name, msgs in serializer.errors.items()
        }
        raise InvalidSchedule(
            "; ".join(f"{n}: {m[0]}" for n, m in fields.items() if m), fields=fields
        )
    return dict(serializer.validated_data)


class LifeListCreateApi(APIView):
    @extend_schema(
        operation_id="schedules_list",
        parameters=[LifeListFilterSerializer],
        responses={200: LifeOutputSerializer(many=True), **error_responses(400)},
    )
    def get(self, request: Request) -> Response:
        filters = _validated(LifeListFilterSerializer, request.query_params)
        lives = selectors.life_list(user=request.user, **filters)  # type: ignore[arg-type]
        return Response(LifeOutputSerializer(lives, many=True).data)

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
        data = _validated(LifeCreateInputSerializer, request.data)
        spec = life_spec_build(data)
        result = life_book(
            user=request.user,  # type: ignore[arg-type]
            spec=spec,
            life_uuid=data.get("life_uuid"),
        )
        life = selectors.life_detail(life_uuid=result.life.life_uuid, user=request.user)  # type: ignore[arg-type]
        status = HTTPStatus.CREATED if result.created else HTTPStatus.OK
        return Response(LifeDetailOutputSerializer(life).data, status=status)


class LifeDetailApi(APIView):
    @extend_schema(
        operation_id="schedules_retrieve",
        responses={200: LifeDetailOutputSerializer, **error_responses(403, 404)},
    )
    def get(self, request: Request, life_uuid: str) -> Response:
        life = selectors.life_detail(life_uuid=life_uuid, user=request.user)  # type: ignore[arg-type]
        return Response(LifeDetailOutputSerializer(life).data)

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
                _400=_400,
                _409="`resource_conflict`, or `plan_started` (only plans not yet started change).",
            ),
        },
    )
    def patch(self, request: Request, life_uuid: str) -> Response:
        data = _validated(LifeChangeInputSerializer, request.data)
        if isinstance(request.data, dict):
            extra = sorted(set(request.data) - set(LifeChangeInputSerializer().fields))
            if extra:
                data.update({name: request.data[name] for name in extra})
        life_change(user=request.user, life_uuid=life_uuid, data=data)  # type: ignore[arg-type]
        life = selectors.life_detail(life_uuid=life_uuid, user=request.user)  # type: ignore[arg-type]
        return Response(LifeDetailOutputSerializer(life).data)

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
        life_cancel(life_uuid=life_uuid, user=request.user)  # type: ignore[arg-type]
        life = selectors.life_detail(life_uuid=life_uuid, user=request.user)  # type: ignore[arg-type]
        return Response(LifeDetailOutputSerializer(life).data)


class TaskCreateApi(APIView):
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
        serializer = TaskInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        key = request.auth.webhook_id if isinstance(request.auth, Plan) else None
        result = task_run_create(
            user=request.user,  # type: ignore[arg-type]
            topic=serializer.validated_data["topic"],
            content=serializer.validated_data["content"],
            key=key,
        )
        run = result.task_run
        body = {"task_id": run.task_id, "topic": run.topic, "state": run.state}
        return Response(body, status=HTTPStatus.ACCEPTED if result.created else HTTPStatus.OK)
