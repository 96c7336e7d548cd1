"""Review, regrade and leaderboard endpoints: thin views over the services."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.permissions import AllowAny, BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.schema import error_responses
from apps.core.exceptions import InvalidRequest, NotFound
from apps.review import selectors, services
from apps.review.api import serializers as s
from apps.review.exceptions import NotReviewer

_ID = OpenApiParameter("submission_id", str, OpenApiParameter.PATH, description="Submission id.")
_CLAIMED = "`already_claimed` (another reviewer holds a live claim; the body has `claimed_by` "
_CLAIMED += "and `claim_expires_at`), `own_submission` (you own it) or `invalid_transition` "
_CLAIMED += "(not awaiting review)."


_HEX_ID = re.compile(r"[0-9a-f]{32}")


def _submission_id(raw: str) -> str:
    """Ids are 32 lowercase hex characters; anything else (NUL included) cannot exist → 404."""
    if not _HEX_ID.fullmatch(raw):
        raise NotFound(f"Submission {raw[:64]!r} not found.")
    return raw


def _validated(serializer_class: type[Any], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        raise InvalidRequest(fields={k: [str(m) for m in v] for k, v in serializer.errors.items()})
    return dict(serializer.validated_data)


def _claim_body(state: services.review.ClaimState) -> dict[str, Any]:
    return {
        "submission_id": state.submission_id,
        "claimed_by": state.claimed_by,
        "claim_expires_at": state.claim_expires_at,
    }


class ReviewDetailApi(APIView):
    """A submission as a reviewer needs it: files (small text files inline), the grader's
    output and every grading attempt. Reviewers only."""

    @extend_schema(
        parameters=[_ID],
        responses={200: s.ReviewDetailSerializer, **error_responses(403, 404)},
        operation_id="review_submission_detail",
    )
    def get(self, request: Request, submission_id: str) -> Response:
        if not services.user_is_reviewer(request.user):
            raise NotReviewer()
        detail = selectors.review_detail(submission_id=_submission_id(submission_id))
        return Response(s.ReviewDetailSerializer(detail).data)


class ReviewQueueApi(APIView):
    """review_pending submissions: unclaimed or expired first, oldest first. Reviewers only."""

    @extend_schema(
        parameters=[s.QueueQuerySerializer],
        responses={200: s.QueueRowSerializer(many=True), **error_responses(400, 403)},
        operation_id="review_queue",
    )
    def get(self, request: Request) -> Response:
        if not services.user_is_reviewer(request.user):
            raise NotReviewer()
        query = _validated(s.QueueQuerySerializer, request.query_params)
        rows = list(selectors.review_queue(limit=query["limit"]))
        reviewers = selectors.users_by_id(
            {r.claim_reviewer_id for r in rows if r.claim_reviewer_id is not None}  # type: ignore[attr-defined]
        )
        body = [
            {
                "id": row.pk,
                "owner": row.owner,
                "question_id": row.question_id,
                "skill": row.skill,
                "score": row.score,
                "created_at": row.created_at,
                "claimed_by": reviewers.get(row.claim_reviewer_id),  # type: ignore[attr-defined]
                "claim_expires_at": row.claim_expires_at,  # type: ignore[attr-defined]
            }
            for row in rows
        ]
        return Response(s.QueueRowSerializer(body, many=True).data)


class ReviewClaimApi(APIView):
    @extend_schema(
        request=None,
        parameters=[_ID],
        responses={200: s.ClaimOutputSerializer, **error_responses(403, 404, 409, _409=_CLAIMED)},
        operation_id="review_claim",
    )
    def post(self, request: Request, submission_id: str) -> Response:
        state = services.review_claim(
            user=request.user, submission_id=_submission_id(submission_id)
        )
        return Response(s.ClaimOutputSerializer(_claim_body(state)).data)


class ReviewClaimExtendApi(APIView):
    @extend_schema(
        request=None,
        parameters=[_ID],
        responses={
            200: s.ClaimOutputSerializer,
            **error_responses(
                403,
                404,
                409,
                _409="`not_claim_holder` (no live claim of yours), `own_submission` or "
                "`invalid_transition`.",
            ),
        },
        operation_id="review_claim_extend",
    )
    def post(self, request: Request, submission_id: str) -> Response:
        state = services.review_claim_extend(
            user=request.user, submission_id=_submission_id(submission_id)
        )
        return Response(s.ClaimOutputSerializer(_claim_body(state)).data)


class ReviewClaimReleaseApi(APIView):
    @extend_schema(
        request=None,
        parameters=[_ID],
        responses={
            200: s.ReleaseOutputSerializer,
            **error_responses(403, 404, 409, _409="`not_claim_holder` (no live claim of yours)."),
        },
        operation_id="review_claim_release",
    )
    def post(self, request: Request, submission_id: str) -> Response:
        released = services.review_claim_release(
            user=request.user, submission_id=_submission_id(submission_id)
        )
        return Response({"submission_id": submission_id, "released": released})


class ReviewCompleteApi(APIView):
    @extend_schema(
        request=s.CompleteInputSerializer,
        parameters=[_ID],
        responses={
            200: s.CompleteOutputSerializer,
            **error_responses(
                400,
                403,
                404,
                409,
                415,
                _409="`not_claim_holder` (no live claim of yours), `own_submission` (you own "
                "it) or `invalid_transition` "
                "(not awaiting review, e.g. already finished).",
            ),
        },
        operation_id="review_complete",
    )
    def post(self, request: Request, submission_id: str) -> Response:
        data = _validated(s.CompleteInputSerializer, request.data)
        record = services.review_complete(
            user=request.user,
            submission_id=_submission_id(submission_id),
            verdict=data["verdict"],
            score=data.get("score"),
            comment=data.get("comment", ""),
        )
        submission = record.submission
        body = {
            "submission_id": submission.pk,
            "status": submission.status,
            "score": submission.score,
            "review": record,
        }
        return Response(s.CompleteOutputSerializer(body).data)


class SubmissionRegradeApi(APIView):
    """Staff: completed/failed → pending with a new job (free; the owner's concurrent limit
    holds)."""

    @extend_schema(
        request=None,
        parameters=[_ID],
        responses={
            201: s.RegradeOutputSerializer,
            **error_responses(
                403,
                404,
                409,
                429,
                _409="`invalid_transition` (not completed/failed), `own_submission` (your own: "
                "only the admin may override) or `submission_in_flight`.",
                _429="`quota_exceeded`: the owner's concurrent-job slots are all taken (a "
                "regrade is exempt from the daily and cost limits only).",
            ),
        },
        operation_id="review_regrade",
    )
    def post(self, request: Request, submission_id: str) -> Response:
        result = services.submission_regrade(
            user=request.user, submission_id=_submission_id(submission_id)
        )
        body = {
            "submission_id": result.submission.pk,
            "status": result.submission.status,
            "job_id": result.job.pk,
        }
        return Response(s.RegradeOutputSerializer(body).data, status=201)


class LeaderboardApi(APIView):
    """Best completed score per user, ranked (ties: earlier completion first). Public while
    `LEADERBOARD_PUBLIC` is on (the default); otherwise authenticated like every endpoint."""

    def get_permissions(self) -> list[BasePermission]:
        if settings.LEADERBOARD_PUBLIC:
            return [AllowAny()]
        return [IsAuthenticated()]

    @extend_schema(
        parameters=[s.LeaderboardQuerySerializer],
        responses={200: s.LeaderboardRowSerializer(many=True), **error_responses(400)},
        operation_id="leaderboard",
        description="Public while LEADERBOARD_PUBLIC is on (the default); when it is off, 401 "
        "without authentication.",
    )
    def get(self, request: Request) -> Response:
        query = _validated(s.LeaderboardQuerySerializer, request.query_params)
        rows = selectors.leaderboard(
            question_id=query.get("question_id"), skill=query.get("skill"), limit=query["limit"]
        )
        return Response(s.LeaderboardRowSerializer(rows, many=True).data)
