"""Teams, grants and a team's view of a phase (SPEC §11.4)."""

from __future__ import annotations

from http import HTTPStatus

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from apps.benchmarks.api.team_serializers import (
    GrantInputSerializer,
    GrantOutputSerializer,
    PhaseMineSerializer,
    TeamCreateInputSerializer,
    TeamJoinInputSerializer,
    TeamOutputSerializer,
)
from apps.benchmarks.services.grants import team_grant_create, team_grant_list
from apps.benchmarks.services.teams import team_create, team_join, team_leave, team_mine
from apps.benchmarks.team_selectors import phase_mine
from apps.core.api.base import ApiView
from apps.core.api.schema import error_responses

_TEAM_409 = "`already_in_team`, `team_full`, `team_name_taken`, `team_locked`."


class TeamCreateApi(ApiView):
    @extend_schema(
        operation_id="challenges_teams_create",
        request=TeamCreateInputSerializer,
        responses={201: TeamOutputSerializer, **error_responses(400, 404, 409, _409=_TEAM_409)},
        description="Create a team with the caller as its member (approved participants).",
    )
    def post(self, request: Request, slug: str) -> Response:
        data = self.body(TeamCreateInputSerializer)
        view = team_create(user=self.user, slug=slug, name=data["name"])
        return self.respond(TeamOutputSerializer, view, status=HTTPStatus.CREATED)


class TeamJoinApi(ApiView):
    @extend_schema(
        operation_id="challenges_teams_join",
        request=TeamJoinInputSerializer,
        responses={200: TeamOutputSerializer, **error_responses(400, 404, 409, _409=_TEAM_409)},
    )
    def post(self, request: Request, slug: str) -> Response:
        data = self.body(TeamJoinInputSerializer)
        view = team_join(user=self.user, slug=slug, invite_code=data["invite_code"])
        return self.respond(TeamOutputSerializer, view)


class TeamLeaveApi(ApiView):
    @extend_schema(
        operation_id="challenges_teams_leave",
        request=None,
        responses={204: None, **error_responses(404, 409, _409="`team_locked`.")},
    )
    def post(self, request: Request, slug: str, team_id: str) -> Response:
        team_leave(user=self.user, slug=slug, team_id=team_id)
        return Response(status=HTTPStatus.NO_CONTENT)


class TeamMineApi(ApiView):
    @extend_schema(
        operation_id="challenges_teams_mine",
        responses={200: TeamOutputSerializer, **error_responses(404)},
    )
    def get(self, request: Request, slug: str) -> Response:
        return self.respond(TeamOutputSerializer, team_mine(user=self.user, slug=slug))


class TeamGrantsApi(ApiView):
    token_scopes = {"POST": "host", "GET": "host"}

    @extend_schema(
        operation_id="challenges_teams_grants_list",
        responses={200: GrantOutputSerializer(many=True), **error_responses(404)},
    )
    def get(self, request: Request, slug: str, team_id: str) -> Response:
        grants = team_grant_list(user=self.user, slug=slug, team_id=team_id)
        return self.respond(GrantOutputSerializer, grants, many=True)

    @extend_schema(
        operation_id="challenges_teams_grants_create",
        request=GrantInputSerializer,
        responses={201: GrantOutputSerializer, **error_responses(400, 404)},
        description="Grant the team extra submissions on a phase's per_day (today, UTC) or "
        "total limit (hosts and staff).",
    )
    def post(self, request: Request, slug: str, team_id: str) -> Response:
        data = self.body(GrantInputSerializer)
        grant = team_grant_create(user=self.user, slug=slug, team_id=team_id, **data)
        return self.respond(GrantOutputSerializer, grant, status=HTTPStatus.CREATED)


class PhaseMineApi(ApiView):
    @extend_schema(
        operation_id="challenges_phases_me",
        responses={200: PhaseMineSerializer, **error_responses(404)},
        description="The caller's team in the phase: its limits' use and its submissions.",
    )
    def get(self, request: Request, slug: str, phase: str) -> Response:
        mine = phase_mine(user=self.user, slug=slug, phase_slug=phase)
        return self.respond(PhaseMineSerializer, mine)
