"""`/api/leaderboard/` and `/api/review/`: the ranking, the review queue, claims, verdicts,
a submission's files and their downloads."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from yoyaku_client import models
from yoyaku_client.endpoints.base import ApiBase
from yoyaku_client.transport import Safety

if TYPE_CHECKING:
    from yoyaku_client.files import ReviewDetail
    from yoyaku_client.models import (
        Claim,
        ClaimRelease,
        LeaderboardQuestion,
        LeaderboardRow,
        Regrade,
        ReviewOutcome,
        ReviewQueueEntry,
    )


class ReviewApi(ApiBase):
    """The leaderboard; the review queue, claims and verdicts; files and downloads."""

    def leaderboard(
        self, *, question_id: str | None = None, skill: str | None = None, limit: int | None = None
    ) -> list[LeaderboardRow]:
        """`GET /api/leaderboard/`: best completed score per user (public by default)."""
        params = {"question_id": question_id, "skill": skill, "limit": limit}
        return [
            models.LeaderboardRow.from_api(r)
            for r in self._json("GET", "/leaderboard/", params=params)
        ]

    def leaderboard_questions(self, *, limit: int | None = None) -> list[LeaderboardQuestion]:
        """`GET /api/leaderboard/questions/`: the questions that have a leaderboard."""
        rows = self._json("GET", "/leaderboard/questions/", params={"limit": limit})
        return [models.LeaderboardQuestion.from_api(r) for r in rows]

    def review_queue(self, *, limit: int | None = None) -> list[ReviewQueueEntry]:
        """`GET /api/review/queue/` (reviewers)."""
        rows = self._json("GET", "/review/queue/", params={"limit": limit})
        return [models.ReviewQueueEntry.from_api(r) for r in rows]

    def review_submission(self, submission_id: str) -> ReviewDetail:
        """`GET /api/review/submissions/{id}/` (reviewers): files with archive members and
        download paths, the grader's output, every grading attempt."""
        from yoyaku_client.files import ReviewDetail

        data = self._json("GET", f"/review/submissions/{submission_id}/")
        return ReviewDetail.from_api(data)

    def download_file(
        self,
        submission_id: str,
        file_id: int,
        dest: Path | str = ".",
        *,
        review: bool = False,
        name: str | None = None,
    ) -> Path:
        """Stream one file of a submission into the folder `dest`, checked against its
        sha256, under a safe local name (never a path from the server; `UnsafeFileName` for a
        name that cannot be one). `review=True` goes through the review API (a token with
        `review`). Returns the path written."""
        from yoyaku_client.files import download

        prefix = "/review/submissions" if review else "/submissions"
        path = f"{prefix}/{submission_id}/files/{int(file_id)}/download/"
        return download(self.transport, path, dest, name=name)

    def claim_review(self, submission_id: str) -> Claim:
        """`POST .../claim/`: yours already → extended, so repeating it is harmless."""
        return models.Claim.from_api(
            self._json("POST", f"/review/submissions/{submission_id}/claim/")
        )

    def extend_review_claim(self, submission_id: str) -> Claim:
        return models.Claim.from_api(
            self._json("POST", f"/review/submissions/{submission_id}/extend/")
        )

    def release_review_claim(self, submission_id: str) -> ClaimRelease:
        path = f"/review/submissions/{submission_id}/release/"
        return models.ClaimRelease.from_api(self._json("POST", path, safety=Safety.UNSAFE))

    def complete_review(
        self,
        submission_id: str,
        *,
        verdict: str,
        score: float | None = None,
        comment: str = "",
    ) -> ReviewOutcome:
        """`POST .../complete/` with `approve` or `reject`. Not repeated after a lost answer
        (a second one would answer 409 `invalid_transition`)."""
        body: dict[str, Any] = {"verdict": verdict, "comment": comment}
        if score is not None:
            body["score"] = score
        path = f"/review/submissions/{submission_id}/complete/"
        return models.ReviewOutcome.from_api(
            self._json("POST", path, json=body, safety=Safety.UNSAFE)
        )

    def regrade(self, submission_id: str) -> Regrade:
        """`POST .../regrade/` (staff): a new job for a finished submission."""
        path = f"/review/submissions/{submission_id}/regrade/"
        return models.Regrade.from_api(self._json("POST", path, safety=Safety.UNSAFE))
