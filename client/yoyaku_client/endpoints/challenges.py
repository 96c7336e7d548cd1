"""`/api/challenges/`: challenges, their phases, leaderboards, teams and finals.

The answers are the server's JSON documents as they are (dicts): the shapes are those of
docs/api.md "Challenges"."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from yoyaku_client.endpoints.base import ApiBase
from yoyaku_client.multipart import FilePart, multipart_body
from yoyaku_client.transport import Safety


def _seg(value: str) -> str:
    return quote(value, safe="")


class ChallengesApi(ApiBase):
    """Challenges, phases, leaderboards, teams and finals."""

    def list_challenges(self) -> list[dict[str, Any]]:
        """`GET /api/challenges/`: public ones and those you host or take part in."""
        data = self._json("GET", "/challenges/")
        return list(data["results"] if isinstance(data, dict) and "results" in data else data)

    def get_challenge(self, slug: str) -> dict[str, Any]:
        """`GET /api/challenges/{slug}/`: the challenge with its phases."""
        result: dict[str, Any] = self._json("GET", f"/challenges/{_seg(slug)}/")
        return result

    def phase_me(self, slug: str, phase: str) -> dict[str, Any]:
        """`GET .../phases/{phase}/me/`: your team's limits and submissions in the phase."""
        result: dict[str, Any] = self._json(
            "GET", f"/challenges/{_seg(slug)}/phases/{_seg(phase)}/me/"
        )
        return result

    def phase_leaderboard(
        self, slug: str, phase: str, *, split: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        """`GET .../phases/{phase}/leaderboard/`: one split's board."""
        params: dict[str, Any] = {}
        if split:
            params["split"] = split
        if limit is not None:
            params["limit"] = limit
        result: dict[str, Any] = self._json(
            "GET",
            f"/challenges/{_seg(slug)}/phases/{_seg(phase)}/leaderboard/",
            params=params,
            auth=True,
        )
        return result

    def phase_rescore(self, slug: str, phase: str) -> dict[str, Any]:
        """`GET .../phases/{phase}/rescore/` (hosts): the newest rescore's `version`, `done`,
        `failed`, `total`, `state` and the `scoring_version` the leaderboard serves."""
        result: dict[str, Any] = self._json(
            "GET", f"/challenges/{_seg(slug)}/phases/{_seg(phase)}/rescore/"
        )
        return result

    def create_team(self, slug: str, name: str) -> dict[str, Any]:
        """`POST .../teams/`: a new team with you in it. Not repeated after a lost answer."""
        result: dict[str, Any] = self._json(
            "POST", f"/challenges/{_seg(slug)}/teams/", json={"name": name}, safety=Safety.UNSAFE
        )
        return result

    def join_team(self, slug: str, invite_code: str) -> dict[str, Any]:
        """`POST .../teams/join/`: join the team with this invite code."""
        result: dict[str, Any] = self._json(
            "POST",
            f"/challenges/{_seg(slug)}/teams/join/",
            json={"invite_code": invite_code},
            safety=Safety.UNSAFE,
        )
        return result

    def my_team(self, slug: str) -> dict[str, Any]:
        """`GET .../teams/mine/`: your team (404 when you are in none)."""
        result: dict[str, Any] = self._json("GET", f"/challenges/{_seg(slug)}/teams/mine/")
        return result

    def set_final(self, submission_id: str, final: bool) -> dict[str, Any]:
        """`POST` (select) or `DELETE` (unselect) `/api/submissions/{id}/final/`; again answers
        the same."""
        result: dict[str, Any] = self._json(
            "POST" if final else "DELETE", f"/submissions/{submission_id}/final/", json={}
        )
        return result

    def push_bundle(
        self, bundle: Path | None, *, dry_run: bool = False, upload_id: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        """`POST /api/challenges/` with the bundle (a zip), or with `upload_id`, a finished
        resumable upload of it (`upload_resumable`): (the HTTP status, the answer).
        Not repeated after a lost answer; applying the same bytes again changes nothing."""
        if upload_id is not None:
            response = self.transport.request(
                "POST",
                "/challenges/",
                params={"dry_run": "true"} if dry_run else None,
                json={"upload_id": upload_id},
                safety=Safety.UNSAFE,
            )
            return response.status_code, response.json()
        if bundle is None:
            raise ValueError("push_bundle needs a bundle or an upload_id")
        body = multipart_body(
            [("dry_run", "true")] if dry_run else [],
            [FilePart(path=bundle, filename=bundle.name, field="bundle")],
        )
        response = self.transport.request("POST", "/challenges/", body=body, safety=Safety.UNSAFE)
        return response.status_code, response.json()
