"""Leaderboards of a phase, finals, and the hosts' list of a phase's submissions."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.permissions import AllowAny, BasePermission, IsAuthenticated
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from apps.benchmarks.api.board_serializers import (
    BoardOutputSerializer,
    BoardQuerySerializer,
    FinalOutputSerializer,
    HostEntriesQuerySerializer,
    HostEntryPageSerializer,
)
from apps.benchmarks.board_cursor import board_read
from apps.benchmarks.board_selectors import (
    Board,
    BoardRow,
    board_access,
    board_open,
    board_stream,
)
from apps.benchmarks.host_selectors import host_entries_detail, host_entry_list
from apps.benchmarks.services.finals import final_set
from apps.core.api.base import ApiView
from apps.core.api.downloads import content_disposition
from apps.core.api.pagination import page_of
from apps.core.api.schema import error_response, error_responses
from apps.core.exceptions import InvalidRequest

_CSV = "text/csv"
_JSON = "application/json"
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class JsonNegotiation(BaseContentNegotiation):
    """Always the JSON renderer, whatever `Accept` or `format` say: the view streams a CSV
    itself, and every error stays the one JSON body (an unknown `format` is then a 400 of the
    query's validation, never DRF's 404)."""

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        return next(iter(parsers), None)

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))
        return renderer, renderer.media_type


def _cell(text: str) -> str:
    """A team name as a spreadsheet shows it, never as a formula (CSV injection)."""
    return f"'{text}" if text.startswith(_FORMULA_START) else text


def _time(value: datetime | None) -> str | None:
    """As DRF's DateTimeField renders a time (UTC as `Z`)."""
    if value is None:
        return None
    text = value.astimezone(UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _board_json(board: Board, next_cursor: str | None) -> dict[str, Any]:
    """The page as `BoardOutputSerializer` documents it, built from plain values: a page of
    1,000 rows through nested serializers cost more than all its queries."""
    return {
        "challenge": board.challenge,
        "phase": board.phase,
        "split": board.split,
        "scoring_version": board.scoring_version,
        "revealed": board.revealed,
        "columns": [
            {"key": m.key, "label": m.label, "direction": m.direction, "precision": m.precision}
            for m in board.columns
        ],
        "rows": [
            {
                "rank": row.rank,
                "team": {"id": row.team.id, "name": row.team.name} if row.team else None,
                "scores": row.scores,
                "submission_id": row.submission_id,
                "submitted_at": _time(row.submitted_at),
                "baseline": row.baseline,
            }
            for row in board.rows
        ],
        "count": board.count,
        "limit": board.limit,
        "offset": board.offset,
        "next": next_cursor,
    }


def _csv_lines(board: Board, rows: Iterator[BoardRow]) -> Iterator[str]:
    keys = [metric.key for metric in board.columns]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")

    def flush() -> str:
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    writer.writerow(["rank", "team_id", "team", "baseline", "submission_id", "submitted_at", *keys])
    yield flush()
    for row in rows:
        writer.writerow(
            [
                "" if row.rank is None else row.rank,
                row.team.id if row.team else "",
                _cell(row.team.name) if row.team else "",
                "true" if row.baseline else "false",
                row.submission_id or "",
                row.submitted_at.isoformat() if row.submitted_at else "",
                *(repr(float(row.scores[key])) if key in row.scores else "" for key in keys),
            ]
        )
        yield flush()


class PhaseLeaderboardApi(ApiView):
    """A phase's leaderboard for one split: one row per team (its best counted, completed
    submission; for a hidden split after the reveal, the best among its finals) and the
    baselines where their scores place them. Public for a public challenge while
    LEADERBOARD_PUBLIC is on; else for those who may see the challenge."""

    content_negotiation_class = JsonNegotiation

    def get_permissions(self) -> list[BasePermission]:
        if settings.LEADERBOARD_PUBLIC:
            return [AllowAny()]
        return [IsAuthenticated()]

    @extend_schema(
        operation_id="challenges_phases_leaderboard",
        parameters=[BoardQuerySerializer],
        responses={
            (200, _JSON): BoardOutputSerializer,
            (200, _CSV): OpenApiResponse(
                OpenApiTypes.STR, description="The same rows as CSV, streamed."
            ),
            **error_responses(
                400,
                404,
                _400="`invalid_request`: an unknown split or scoring version, a bad limit, "
                "a forged or foreign cursor.",
                _401="Not authenticated: a leaderboard that is not public (`not_authenticated`).",
                _403="`not_revealed`: a hidden split before the reveal (hosts and staff "
                "excepted); `insufficient_scope`.",
            ),
            414: error_response(414, "`uri_too_long`: a URL over MAX_URL_LENGTH."),
        },
    )
    def get(self, request: Request, slug: str, phase: str) -> Response | StreamingHttpResponse:
        query = self.query(BoardQuerySerializer)
        access = board_access(slug=slug, phase_slug=phase, user=request.user)
        board = board_open(
            access=access, split=query["split"], scoring_version=query.get("scoring_version")
        )
        wants_csv = query.get("format") == "csv" or (
            "format" not in query and request._request.get_preferred_type([_JSON, _CSV]) == _CSV
        )
        if wants_csv:
            if "cursor" in query:
                raise InvalidRequest(
                    "A CSV export takes no cursor.",
                    fields={"cursor": ["A CSV export takes no cursor."]},
                )
            limit = query["limit"] if "limit" in request.query_params else None
            rows = board_stream(
                board=board, phase=access.phase, offset=query["offset"], limit=limit
            )
            response = StreamingHttpResponse(
                _csv_lines(board, rows), content_type=f"{_CSV}; charset=utf-8"
            )
            name = f"{board.challenge}-{board.phase}-{board.split}.csv"
            response["Content-Disposition"] = content_disposition(name)
            response["Vary"] = "Accept"
            return response
        next_cursor = board_read(
            board=board,
            phase=access.phase,
            limit=query["limit"],
            offset=query["offset"],
            cursor=query.get("cursor"),
        )
        return Response(_board_json(board, next_cursor), headers={"Vary": "Accept"})


class SubmissionFinalApi(ApiView):
    """POST selects the submission as one of its team's finals, DELETE unselects it."""

    @extend_schema(
        operation_id="submissions_final_select",
        request=None,
        responses={
            200: FinalOutputSerializer,
            **error_responses(
                404,
                409,
                _403="`permission_denied`: not a counted, completed submission of your team; "
                "`insufficient_scope`.",
                _409="`finals_frozen` (the phase is revealed), `too_many_finals` (with "
                "`allowed` and `selected`).",
            ),
        },
    )
    def post(self, request: Request, submission_id: str) -> Response:
        result = final_set(user=self.user, submission_id=submission_id, final=True)
        return self.respond(FinalOutputSerializer, result)

    @extend_schema(
        operation_id="submissions_final_unselect",
        request=None,
        responses={
            200: FinalOutputSerializer,
            **error_responses(
                404,
                409,
                _403="`permission_denied`: not a counted, completed submission of your team; "
                "`insufficient_scope`.",
                _409="`finals_frozen` (the phase is revealed).",
            ),
        },
    )
    def delete(self, request: Request, submission_id: str) -> Response:
        result = final_set(user=self.user, submission_id=submission_id, final=False)
        return self.respond(FinalOutputSerializer, result)


class PhaseSubmissionsApi(ApiView):
    """Hosts and staff: every submission of the phase, newest first, with the run's log, the
    scoring program's log, every split's scores, `counted`, `refund_reason` and `failure`."""

    @extend_schema(
        operation_id="challenges_phases_submissions",
        parameters=[HostEntriesQuerySerializer],
        responses={
            200: HostEntryPageSerializer,
            **error_responses(
                400,
                404,
                _403="`permission_denied`: not a host of the challenge; `insufficient_scope`.",
            ),
        },
    )
    def get(self, request: Request, slug: str, phase: str) -> Response:
        query = self.query(HostEntriesQuerySerializer)
        access = board_access(slug=slug, phase_slug=phase, user=self.user)
        entries = host_entry_list(access=access)
        version = query.get("scoring_version") or access.phase.scoring_version
        page = page_of(entries, request=request, limit=query["limit"], offset=query["offset"])
        body: dict[str, Any] = {
            "count": page.count,
            "next": page.next,
            "previous": page.previous,
            "scoring_version": version,
            "results": host_entries_detail(entries=page.results, version=version),
        }
        return self.respond(HostEntryPageSerializer, body, status=HTTPStatus.OK)
