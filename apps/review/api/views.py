"""Review, regrade and leaderboard endpoints: thin views over the services."""

from __future__ import annotations

from http import HTTPStatus

from django.conf import settings
from django.http import FileResponse
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny, BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from apps.core.api.base import ApiView, IsReviewer, IsReviewerOrStaff
from apps.core.api.downloads import DOWNLOAD_RESPONSE, attachment_response
from apps.core.api.schema import error_responses
from apps.core.scopes import Scope
from apps.review import selectors, services
from apps.review.access import submission_get_readable
from apps.review.api import serializers as s
from apps.submissions.files import submission_file_get, submission_file_open

# The review API needs the `review` scope for every method (its reads too); a regrade is a
# staff action (`admin`).
REVIEW_SCOPE = {"*": Scope.REVIEW.value}
ADMIN_SCOPE = {"*": Scope.ADMIN.value}

_CLAIMED = "`already_claimed` (another reviewer holds a live claim; the body has `claimed_by` "
_CLAIMED += "and `claim_expires_at`), `own_submission` (you own it) or `invalid_transition` "
_CLAIMED += "(not awaiting review)."


_READ_403 = (
    "`permission_denied`: not a reviewer, or a submission that neither awaits review nor was "
    "claimed or judged by you; `insufficient_scope`: the token lacks `review`."
)


class ReviewDetailApi(ApiView):
    """A submission as a reviewer needs it: files (small text files inline, an archive's
    members listed, a download path for each), the grader's output and every grading attempt.
    Reviewers only: a submission awaiting review, or one they claimed or judged (their own as
    its owner)."""

    permission_classes = [IsReviewer]
    token_scopes = REVIEW_SCOPE

    @extend_schema(
        responses={200: s.ReviewDetailSerializer, **error_responses(403, 404, _403=_READ_403)},
        operation_id="review_submission_detail",
    )
    def get(self, request: Request, submission_id: str) -> Response:
        readable = submission_get_readable(submission_id=submission_id, user=self.user)
        detail = selectors.review_detail(submission=readable.submission)
        return self.respond(s.ReviewDetailSerializer, detail, submission_id=submission_id)


class ReviewFileDownloadApi(ApiView):
    """One file of a submission under review, as an attachment (streamed; never rendered)."""

    permission_classes = [IsReviewer]
    token_scopes = REVIEW_SCOPE

    @extend_schema(
        responses={
            (200, "application/octet-stream"): DOWNLOAD_RESPONSE,
            **error_responses(403, 404, _403=_READ_403),
        },
        operation_id="review_file_download",
    )
    def get(self, request: Request, submission_id: str, file_id: int) -> FileResponse:
        readable = submission_get_readable(submission_id=submission_id, user=self.user)
        file = submission_file_get(submission=readable.submission, file_id=file_id)
        stream = submission_file_open(file=file)
        return attachment_response(stream, filename=file.filename, sha256=file.sha256)


class ReviewQueueApi(ApiView):
    """review_pending submissions: unclaimed or expired first, oldest first. Reviewers only."""

    permission_classes = [IsReviewer]
    token_scopes = REVIEW_SCOPE

    @extend_schema(
        parameters=[s.QueueQuerySerializer],
        responses={200: s.QueueRowSerializer(many=True), **error_responses(400, 403)},
        operation_id="review_queue",
    )
    def get(self, request: Request) -> Response:
        query = self.query(s.QueueQuerySerializer)
        rows = list(selectors.review_queue(limit=query["limit"]))
        reviewers = selectors.users_by_id(
            {r.claim_reviewer_id for r in rows if r.claim_reviewer_id is not None}  # type: ignore[attr-defined]
        )
        return self.respond(s.QueueRowSerializer, rows, many=True, reviewers=reviewers)


class ReviewClaimApi(ApiView):
    permission_classes = [IsReviewer]
    token_scopes = REVIEW_SCOPE

    @extend_schema(
        request=None,
        responses={200: s.ClaimOutputSerializer, **error_responses(403, 404, 409, _409=_CLAIMED)},
        operation_id="review_claim",
    )
    def post(self, request: Request, submission_id: str) -> Response:
        state = services.review_claim(user=self.user, submission_id=submission_id)
        return self.respond(s.ClaimOutputSerializer, state)


class ReviewClaimExtendApi(ApiView):
    permission_classes = [IsReviewer]
    token_scopes = REVIEW_SCOPE

    @extend_schema(
        request=None,
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
        state = services.review_claim_extend(user=self.user, submission_id=submission_id)
        return self.respond(s.ClaimOutputSerializer, state)


class ReviewClaimReleaseApi(ApiView):
    # The claimer gives up a live claim; staff release any claim.
    permission_classes = [IsReviewerOrStaff]
    token_scopes = REVIEW_SCOPE

    @extend_schema(
        request=None,
        responses={
            200: s.ReleaseOutputSerializer,
            **error_responses(403, 404, 409, _409="`not_claim_holder` (no live claim of yours)."),
        },
        operation_id="review_claim_release",
    )
    def post(self, request: Request, submission_id: str) -> Response:
        released = services.review_claim_release(user=self.user, submission_id=submission_id)
        result = {"submission_id": submission_id, "released": released}
        return self.respond(s.ReleaseOutputSerializer, result)


class ReviewCompleteApi(ApiView):
    permission_classes = [IsReviewer]
    token_scopes = REVIEW_SCOPE

    @extend_schema(
        request=s.CompleteInputSerializer,
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
        data = self.body(s.CompleteInputSerializer)
        record = services.review_complete(
            user=self.user,
            submission_id=submission_id,
            verdict=data["verdict"],
            score=data.get("score"),
            comment=data.get("comment", ""),
        )
        return self.respond(s.CompleteOutputSerializer, record)


class SubmissionRegradeApi(ApiView):
    """Staff: completed/failed → pending with a new job (free; the owner's concurrent limit
    holds)."""

    token_scopes = ADMIN_SCOPE

    @extend_schema(
        request=None,
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
        result = services.submission_regrade(user=self.user, submission_id=submission_id)
        return self.respond(s.RegradeOutputSerializer, result, status=HTTPStatus.CREATED)


class LeaderboardApi(ApiView):
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
        query = self.query(s.LeaderboardQuerySerializer)
        rows = selectors.leaderboard(
            question_id=query.get("question_id"), skill=query.get("skill"), limit=query["limit"]
        )
        return self.respond(s.LeaderboardRowSerializer, rows, many=True)


class LeaderboardQuestionsApi(LeaderboardApi):
    """The questions that have a leaderboard (a completed, scored submission), by question id,
    with their skills, how many users are ranked and the best score. Visible like the
    leaderboard."""

    @extend_schema(
        parameters=[s.LeaderboardQuestionsQuerySerializer],
        responses={200: s.LeaderboardQuestionSerializer(many=True), **error_responses(400)},
        operation_id="leaderboard_questions",
        description="Public while LEADERBOARD_PUBLIC is on (the default); when it is off, 401 "
        "without authentication.",
    )
    def get(self, request: Request) -> Response:
        query = self.query(s.LeaderboardQuestionsQuerySerializer)
        rows = selectors.leaderboard_questions(limit=query["limit"])
        return self.respond(s.LeaderboardQuestionSerializer, rows, many=True)
