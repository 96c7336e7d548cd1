"""A phase's leaderboard through the real API: one row per team ranked by the primary metric
in its direction, then the other metrics, then the earlier submission; ties share a rank;
baselines stand where their scores put them; pages; earlier scoring versions; CSV."""

from __future__ import annotations

import csv
import io
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from apps.benchmarks.models import Entry, ScoringVersion, Team, TeamBest
from apps.submissions.models import Submission, SubmissionStatus
from tests.benchmarks.boards import (
    BOARD,
    acc,
    baseline_scored,
    make_entry,
    make_phase,
    make_team,
    phase_changed,
    record,
    scored,
)
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db


def _teams(n: int, phase: Any) -> list[Team]:
    return [make_team(phase, f"team-{i}", make_user(username=f"u{i}")) for i in range(n)]


def _board(client: APIClient, query: str = "") -> dict[str, Any]:
    response = client.get(BOARD + query)
    assert response.status_code == HTTPStatus.OK, response.content
    body: dict[str, Any] = response.json()
    return body


def _names(body: dict[str, Any]) -> list[str]:
    return [row["team"]["name"] if row["team"] else "baseline" for row in body["rows"]]


def test_the_answer_has_the_contracts_shape(tmp_path: Path, api_client: APIClient) -> None:
    phase = make_phase(tmp_path)
    (team,) = _teams(1, phase)
    entry = scored(phase, team, public=acc(0.9, 3), private=acc(0.8, 4))

    body = _board(api_client)

    assert {k: body[k] for k in ("challenge", "phase", "split", "scoring_version")} == {
        "challenge": "digits",
        "phase": "dev",
        "split": "public",
        "scoring_version": 1,
    }
    assert body["revealed"] is False
    assert body["columns"] == [
        {"key": "accuracy", "label": "Accuracy", "direction": "max", "precision": 4},
        {"key": "errors", "label": "Wrong answers", "direction": "min", "precision": 0},
    ]
    assert body["rows"] == [
        {
            "rank": 1,
            "team": {"id": team.pk, "name": "team-0"},
            "scores": {"accuracy": 0.9, "errors": 3.0},
            "submission_id": entry.pk,
            "submitted_at": "2026-06-01T12:00:00Z",
            "baseline": False,
        }
    ]
    assert (body["count"], body["limit"], body["offset"]) == (1, 100, 0)


def test_rows_rank_by_primary_then_other_metrics_then_earlier_submission(
    tmp_path: Path, api_client: APIClient
) -> None:
    phase = make_phase(tmp_path)
    a, b, c, d = _teams(4, phase)
    scored(phase, a, minutes=1, public=acc(0.80, 1))
    scored(phase, b, minutes=2, public=acc(0.90, 9))  # best primary
    scored(phase, c, minutes=3, public=acc(0.80, 0))  # same accuracy as a, fewer errors
    scored(phase, d, minutes=0, public=acc(0.80, 1))  # ties a on every metric, earlier

    body = _board(api_client)

    assert _names(body) == ["team-1", "team-2", "team-3", "team-0"]
    assert [row["rank"] for row in body["rows"]] == [1, 2, 3, 3]


def test_a_team_has_one_row_its_best_submission(tmp_path: Path, api_client: APIClient) -> None:
    phase = make_phase(tmp_path)
    a, b = _teams(2, phase)
    scored(phase, a, minutes=0, public=acc(0.5))
    best = scored(phase, a, minutes=1, public=acc(0.95))
    scored(phase, a, minutes=2, public=acc(0.7))
    scored(phase, b, minutes=0, public=acc(0.9))

    body = _board(api_client)

    assert _names(body) == ["team-0", "team-1"]
    assert body["rows"][0]["submission_id"] == best.pk
    assert body["count"] == 2


def test_ties_share_a_rank_and_the_next_rank_skips(tmp_path: Path, api_client: APIClient) -> None:
    phase = make_phase(tmp_path)
    teams = _teams(5, phase)
    for minutes, (team, value) in enumerate(zip(teams, [0.9, 0.9, 0.8, 0.8, 0.7], strict=True)):
        scored(phase, team, minutes=minutes, public=acc(value))

    assert [r["rank"] for r in _board(api_client)["rows"]] == [1, 1, 3, 3, 5]
    # A page that starts inside a tie keeps the shared rank.
    assert [r["rank"] for r in _board(api_client, "?offset=1&limit=2")["rows"]] == [1, 3]
    assert [r["rank"] for r in _board(api_client, "?offset=3")["rows"]] == [3, 5]


@pytest.mark.parametrize("direction", ["min", "max"])
def test_the_primary_metrics_direction_orders_the_rows(
    tmp_path: Path, api_client: APIClient, direction: str
) -> None:
    def change(doc: dict[str, Any]) -> None:
        doc["phases"][0]["metrics"][0]["direction"] = direction

    phase = make_phase(tmp_path, change)
    low, high = _teams(2, phase)
    scored(phase, low, minutes=0, public=acc(0.1))
    scored(phase, high, minutes=1, public=acc(0.9))

    expected = ["team-0", "team-1"] if direction == "min" else ["team-1", "team-0"]
    assert _names(_board(api_client)) == expected


def test_a_min_primary_with_negative_values(tmp_path: Path, api_client: APIClient) -> None:
    phase = make_phase(tmp_path, phase_changed(primary="errors"))
    a, b, c = _teams(3, phase)
    scored(phase, a, minutes=0, public=acc(0.5, 2))
    scored(phase, b, minutes=1, public=acc(0.5, -3))
    scored(phase, c, minutes=2, public=acc(0.5, 0))

    assert _names(_board(api_client)) == ["team-1", "team-2", "team-0"]


def test_baselines_stand_where_their_scores_put_them_without_a_rank(
    tmp_path: Path, api_client: APIClient
) -> None:
    phase = make_phase(tmp_path)
    a, b, c = _teams(3, phase)
    scored(phase, a, minutes=0, public=acc(0.9))
    scored(phase, b, minutes=1, public=acc(0.6))
    scored(phase, c, minutes=2, public=acc(0.3))
    baseline_scored(phase, public=acc(0.5, 7))

    body = _board(api_client)

    assert _names(body) == ["team-0", "team-1", "baseline", "team-2"]
    assert [r["rank"] for r in body["rows"]] == [1, 2, None, 3]
    row = body["rows"][2]
    assert row == {
        "rank": None,
        "team": None,
        "scores": {"accuracy": 0.5, "errors": 7.0},
        "submission_id": None,
        "submitted_at": None,
        "baseline": True,
    }
    assert body["count"] == 4
    # Pages cut through the merged order exactly.
    assert _names(_board(api_client, "?limit=2&offset=1")) == ["team-1", "baseline"]
    page = _board(api_client, "?limit=2&offset=2")
    assert _names(page) == ["baseline", "team-2"]
    assert [r["rank"] for r in page["rows"]] == [None, 3]
    assert _names(_board(api_client, "?limit=2&offset=3")) == ["team-2"]


def test_pages_walk_the_whole_board(tmp_path: Path, api_client: APIClient) -> None:
    phase = make_phase(tmp_path)
    teams = _teams(7, phase)
    for i, team in enumerate(teams):
        scored(phase, team, minutes=i, public=acc(round(1 - (i // 2) * 0.1, 2)))
    baseline_scored(phase, public=acc(0.75))

    whole = _board(api_client)["rows"]
    pages = [_board(api_client, f"?limit=3&offset={o}")["rows"] for o in range(0, 9, 3)]

    assert [r for page in pages for r in page] == whole
    assert len(whole) == 8
    assert [r["rank"] for r in whole] == [1, 1, 3, 3, 5, 5, None, 7]
    assert _board(api_client, "?offset=50")["rows"] == []


def test_only_counted_completed_submissions_stand(
    tmp_path: Path, api_client: APIClient, django_capture_on_commit_callbacks: Any
) -> None:
    phase = make_phase(tmp_path)
    a, b = _teams(2, phase)
    kept = scored(phase, a, minutes=0, public=acc(0.6))
    refunded = scored(phase, a, minutes=1, public=acc(0.9))
    scored(phase, b, minutes=2, public=acc(0.7))
    assert _names(_board(api_client)) == ["team-0", "team-1"]

    # A refund: the entry stops counting, and the team's best is rebuilt in that transaction.
    from apps.benchmarks.services.team_best import team_best_refresh

    Entry.objects.filter(pk=refunded.pk).update(counted=False, refund_reason="scoring_failed")
    team_best_refresh(phase_id=phase.pk, team_id=a.pk)

    body = _board(api_client)
    assert _names(body) == ["team-1", "team-0"]
    assert body["rows"][1]["submission_id"] == kept.pk

    # A team whose only submission stops counting leaves the board.
    Entry.objects.filter(pk=kept.pk).update(counted=False, refund_reason="scoring_failed")
    team_best_refresh(phase_id=phase.pk, team_id=a.pk)
    assert _names(_board(api_client)) == ["team-1"]


def test_a_team_without_a_completed_submission_has_no_row(
    tmp_path: Path, api_client: APIClient
) -> None:
    phase = make_phase(tmp_path)
    a, b = _teams(2, phase)
    make_entry(phase, a, status=SubmissionStatus.FAILED)
    make_entry(phase, a, status=SubmissionStatus.PENDING)
    scored(phase, b, public=acc(0.1))

    assert _names(_board(api_client)) == ["team-1"]


def test_an_earlier_scoring_version_stays_readable(tmp_path: Path, api_client: APIClient) -> None:
    phase = make_phase(tmp_path)
    a, b = _teams(2, phase)
    ea = scored(phase, a, minutes=0, public=acc(0.9))
    eb = scored(phase, b, minutes=1, public=acc(0.8))
    ScoringVersion.objects.create(
        phase=phase,
        number=2,
        bundle_file="x.zip",
        scoring_program="scoring/",
        scoring_entrypoint="score.py",
        reference_data="data/ref/",
        scoring_program_digest="0" * 64,
        reference_data_digest="1" * 64,
    )
    record(ea, 2, public=acc(0.1), private=acc(0.1))
    record(eb, 2, public=acc(0.2), private=acc(0.2))

    assert _names(_board(api_client)) == ["team-0", "team-1"]  # still version 1 served
    # Version 2 is not served yet: only hosts read it.
    response = api_client.get(BOARD + "?scoring_version=2")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_request"

    type(phase).objects.filter(pk=phase.pk).update(scoring_version=2)
    body = _board(api_client)
    assert body["scoring_version"] == 2
    assert _names(body) == ["team-1", "team-0"]
    earlier = _board(api_client, "?scoring_version=1")
    assert (earlier["scoring_version"], _names(earlier)) == (1, ["team-0", "team-1"])


@pytest.mark.parametrize(
    "query",
    [
        "?split=nope",
        "?split=",
        "?limit=0",
        "?limit=1001",
        "?limit=abc",
        "?offset=-1",
        "?scoring_version=9",
        "?scoring_version=0",
        "?format=xml",
        "?split=public&split=private",
    ],
)
def test_bad_queries_are_invalid_request(tmp_path: Path, api_client: APIClient, query: str) -> None:
    make_phase(tmp_path)

    response = api_client.get(BOARD + query)

    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_request"
    assert response.json()["fields"]


def test_unknown_phase_is_not_found(tmp_path: Path, api_client: APIClient) -> None:
    make_phase(tmp_path)

    response = api_client.get("/api/challenges/digits/phases/nope/leaderboard/")

    assert response.status_code == HTTPStatus.NOT_FOUND
    assert response.json()["code"] == "not_found"


def _csv(response: Any) -> list[list[str]]:
    assert response.status_code == HTTPStatus.OK
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith("attachment;")
    text = b"".join(response.streaming_content).decode()
    return list(csv.reader(io.StringIO(text)))


def test_csv_gives_the_same_rows_by_accept_or_format(
    tmp_path: Path, api_client: APIClient, settings: Any
) -> None:
    from apps.benchmarks import board_selectors

    phase = make_phase(tmp_path)
    teams = _teams(5, phase)
    teams[3].name = "=HYPERLINK(1)"
    teams[3].save()
    for i, team in enumerate(teams):
        scored(phase, team, minutes=i, public=acc([0.9, 0.9, 0.5, 0.4, 0.2][i], i))
    baseline_scored(phase, public=acc(0.45, 1.5))
    # Stream in chunks smaller than the board, so chunk boundaries are crossed.
    board_selectors.CSV_CHUNK, chunk = 2, board_selectors.CSV_CHUNK
    try:
        by_accept = _csv(api_client.get(BOARD, HTTP_ACCEPT="text/csv"))
        by_format = _csv(api_client.get(BOARD + "?format=csv"))
        paged = _csv(api_client.get(BOARD + "?format=csv&offset=2&limit=3"))
    finally:
        board_selectors.CSV_CHUNK = chunk
    json_rows = _board(api_client)["rows"]

    assert by_accept == by_format
    header, *rows = by_accept
    assert header == [
        "rank",
        "team_id",
        "team",
        "baseline",
        "submission_id",
        "submitted_at",
        "accuracy",
        "errors",
    ]
    assert len(rows) == len(json_rows) == 6
    for line, row in zip(rows, json_rows, strict=True):
        assert line[0] == ("" if row["rank"] is None else str(row["rank"]))
        assert line[1] == (row["team"]["id"] if row["team"] else "")
        assert line[3] == ("true" if row["baseline"] else "false")
        assert line[4] == (row["submission_id"] or "")
        assert [float(line[6]), float(line[7])] == [
            row["scores"]["accuracy"],
            row["scores"]["errors"],
        ]
    names = ["team-0", "team-1", "team-2", "", "'=HYPERLINK(1)", "team-4"]
    assert [line[2] for line in rows] == names
    assert paged == [header, *rows[2:5]]


def test_json_is_the_default_and_errors_stay_json_under_accept_csv(
    tmp_path: Path, api_client: APIClient
) -> None:
    make_phase(tmp_path)

    assert api_client.get(BOARD, HTTP_ACCEPT="*/*")["Content-Type"] == "application/json"
    response = api_client.get(BOARD + "?split=private", HTTP_ACCEPT="text/csv")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "not_revealed"


def test_a_page_reads_team_best_not_the_scores(
    tmp_path: Path, api_client: APIClient, django_assert_max_num_queries: Any
) -> None:
    phase = make_phase(tmp_path)
    teams = _teams(30, phase)
    for i, team in enumerate(teams):
        for k in range(3):
            scored(phase, team, minutes=i * 3 + k, public=acc(0.5 + (i % 7) / 100 + k / 1000))
    baseline_scored(phase, public=acc(0.53))
    assert TeamBest.objects.filter(phase=phase, split="public").count() == 30

    with django_assert_max_num_queries(12):
        body = _board(api_client, "?offset=10&limit=10")

    assert len(body["rows"]) == 10
    assert body["count"] == 31


def test_finals_endpoint_is_reached_under_submissions(user: User, user_client: APIClient) -> None:
    submission = Submission.objects.create(owner=user, status=SubmissionStatus.COMPLETED)

    response = user_client.post(f"/api/submissions/{submission.pk}/final/")

    assert response.status_code == HTTPStatus.FORBIDDEN  # not a phase submission
    assert response.json()["code"] == "permission_denied"
