"""Keyset pages of a phase's leaderboard through the real API: walking the board by `next`
cursors gives exactly the rows (ranks, ties and baselines across page boundaries) that walking
it by `offset` gives; a forged, altered or foreign cursor is 400 `invalid_request`."""

from __future__ import annotations

from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.core import signing
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from apps.benchmarks.models import Phase, ScoringVersion, Team
from tests.benchmarks.boards import BOARD, acc, baseline_scored, make_phase, make_team, scored
from tests.factories.users import make_user

pytestmark = pytest.mark.django_db


def _teams(n: int, phase: Any) -> list[Team]:
    return [make_team(phase, f"team-{i}", make_user(username=f"u{i}")) for i in range(n)]


def _get(client: APIClient, query: str) -> dict[str, Any]:
    response = client.get(BOARD + query)
    assert response.status_code == HTTPStatus.OK, response.content
    body: dict[str, Any] = response.json()
    return body


def _walk_by_cursor(client: APIClient, limit: int, extra: str = "") -> list[dict[str, Any]]:
    """Every page from the first by `next`; checks each page's count and offset."""
    pages = [_get(client, f"?limit={limit}{extra}")]
    while pages[-1]["next"] is not None:
        cursor = quote(pages[-1]["next"])
        pages.append(_get(client, f"?limit={limit}&cursor={cursor}{extra}"))
        assert len(pages) < 100
    return pages


def _tied_board(tmp_path: Path) -> Phase:
    """Seven teams tied in pairs (ranks 1 1 3 3 5 5 7) and a baseline between the last two."""
    phase = make_phase(tmp_path)
    for i, team in enumerate(_teams(7, phase)):
        scored(phase, team, minutes=i, public=acc(round(1 - (i // 2) * 0.1, 2)))
    baseline_scored(phase, public=acc(0.75))
    return phase


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 7, 8, 9])
def test_walking_by_cursor_gives_the_rows_of_walking_by_offset(
    tmp_path: Path, api_client: APIClient, limit: int
) -> None:
    _tied_board(tmp_path)

    by_offset = [_get(api_client, f"?limit={limit}&offset={o}") for o in range(0, 8, limit)]
    by_cursor = _walk_by_cursor(api_client, limit)

    assert [page["rows"] for page in by_cursor] == [page["rows"] for page in by_offset]
    assert [page["offset"] for page in by_cursor] == [page["offset"] for page in by_offset]
    assert all(page["count"] == 8 for page in by_cursor)
    rows = [row for page in by_cursor for row in page["rows"]]
    assert [r["rank"] for r in rows] == [1, 1, 3, 3, 5, 5, None, 7]
    assert [r["baseline"] for r in rows].count(True) == 1
    # The last page, by either walk, has no next page.
    assert by_offset[-1]["next"] is None
    assert by_cursor[-1]["next"] is None


def test_an_offset_pages_next_continues_the_walk_with_ties_and_the_baseline(
    tmp_path: Path, api_client: APIClient
) -> None:
    _tied_board(tmp_path)
    whole = _get(api_client, "?limit=8")["rows"]

    for offset in range(1, 8):
        for limit in (1, 2, 3):
            page = _get(api_client, f"?limit={limit}&offset={offset}")
            if page["next"] is None:
                assert offset + limit >= 8
                continue
            after = _get(api_client, f"?limit=3&cursor={quote(page['next'])}")
            assert after["rows"] == whole[offset + limit : offset + limit + 3]
            assert after["offset"] == offset + limit


def test_a_board_that_fits_one_page_has_no_next(tmp_path: Path, api_client: APIClient) -> None:
    _tied_board(tmp_path)

    assert _get(api_client, "?limit=8")["next"] is None
    assert _get(api_client, "?limit=7")["next"] is not None
    assert _get(api_client, "?offset=50")["next"] is None


def test_a_hidden_splits_walk_keeps_its_split(tmp_path: Path, api_client: APIClient) -> None:
    phase = make_phase(tmp_path)
    for i, team in enumerate(_teams(5, phase)):
        scored(phase, team, minutes=i, public=acc(0.5 + i / 10), private=acc(0.9 - i / 10))
    Phase.objects.filter(pk=phase.pk).update(revealed_at=phase.start)

    pages = _walk_by_cursor(api_client, 2, "&split=private")

    names = [row["team"]["name"] for page in pages for row in page["rows"]]
    assert names == [f"team-{i}" for i in range(5)]
    public = _get(api_client, "?limit=2")
    foreign = api_client.get(BOARD + f"?split=private&cursor={quote(public['next'])}")
    assert foreign.status_code == HTTPStatus.BAD_REQUEST
    assert foreign.json()["code"] == "invalid_request"
    assert "cursor" in foreign.json()["fields"]


def _bad(client: APIClient, query: str) -> dict[str, Any]:
    response = client.get(BOARD + query)
    assert response.status_code == HTTPStatus.BAD_REQUEST, response.content
    body: dict[str, Any] = response.json()
    assert body["success"] is False
    assert body["code"] == "invalid_request"
    return body


def test_a_forged_or_altered_cursor_is_invalid_request(
    tmp_path: Path, api_client: APIClient
) -> None:
    _tied_board(tmp_path)
    real = _get(api_client, "?limit=2")["next"]
    payload = signing.loads(real, salt="yoyaku.benchmarks.board-cursor")
    unsigned = signing.dumps(payload, compress=True)  # the right shape, another salt
    with_other_key = signing.dumps(payload, key="x" * 50, salt="yoyaku.benchmarks.board-cursor")
    head, _, signature = real.rpartition(":")
    flipped = head + ":" + ("A" if signature[0] != "A" else "B") + signature[1:]

    for cursor in ("junk", "", unsigned, with_other_key, flipped, real[:-1], "é" * 10):
        body = _bad(api_client, f"?cursor={quote(cursor)}")
        assert "cursor" in body["fields"] or "offset" in body["fields"]
    _bad(api_client, f"?cursor={'a' * 3000}")


def test_a_cursor_of_another_phase_or_scoring_version_is_invalid_request(
    tmp_path: Path, api_client: APIClient
) -> None:
    phase = _tied_board(tmp_path)
    real = _get(api_client, "?limit=2")["next"]
    payload = signing.loads(real, salt="yoyaku.benchmarks.board-cursor")
    other_phase = signing.dumps(
        ["another-phase", *payload[1:]], salt="yoyaku.benchmarks.board-cursor", compress=True
    )
    other_version = signing.dumps(
        [payload[0], payload[1], 2, *payload[3:]],
        salt="yoyaku.benchmarks.board-cursor",
        compress=True,
    )
    ScoringVersion.objects.get_or_create(phase=phase, number=2)

    for cursor in (other_phase, other_version):
        body = _bad(api_client, f"?cursor={quote(cursor)}")
        assert body["fields"] == {"cursor": [body["fields"]["cursor"][0]]}
    # The real cursor still reads version 1, and not the version 2 it did not come from.
    assert _get(api_client, f"?limit=2&cursor={quote(real)}")["rows"]
    _bad(api_client, f"?limit=2&scoring_version=2&cursor={quote(real)}")


def test_a_cursor_with_an_offset_or_a_csv_export_is_invalid_request(
    tmp_path: Path, api_client: APIClient
) -> None:
    _tied_board(tmp_path)
    real = quote(_get(api_client, "?limit=2")["next"])

    assert "offset" in _bad(api_client, f"?cursor={real}&offset=2")["fields"]
    assert "cursor" in _bad(api_client, f"?cursor={real}&format=csv")["fields"]
    response = api_client.get(BOARD + f"?cursor={real}", HTTP_ACCEPT="text/csv")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["code"] == "invalid_request"


def test_a_cursor_page_makes_no_count_and_no_offset(tmp_path: Path, api_client: APIClient) -> None:
    phase = make_phase(tmp_path)
    for i, team in enumerate(_teams(30, phase)):
        scored(phase, team, minutes=i, public=acc(0.5 + (i % 7) / 100))
    baseline_scored(phase, public=acc(0.53))
    first = _get(api_client, "?limit=10&offset=10")

    with CaptureQueriesContext(connection) as captured:
        page = _get(api_client, f"?limit=10&cursor={quote(first['next'])}")

    board_queries = [q["sql"] for q in captured if "benchmarks_teambest" in q["sql"]]
    assert len(board_queries) == 1
    assert "COUNT(" not in board_queries[0].upper()
    assert "OFFSET" not in board_queries[0].upper()
    assert page["offset"] == 20
    assert page["count"] == 31
    assert len(page["rows"]) == 10


def test_a_walk_over_a_board_that_changes_stays_in_order_and_counts_on(
    tmp_path: Path, api_client: APIClient
) -> None:
    phase = make_phase(tmp_path)
    teams = _teams(6, phase)
    for i, team in enumerate(teams):
        scored(phase, team, minutes=i, public=acc(0.9 - i / 10))
    first = _get(api_client, "?limit=3")
    # team-4 (on the next page) improves past every row of the first page.
    scored(phase, teams[4], minutes=10, public=acc(0.95))

    second = _get(api_client, f"?limit=3&cursor={quote(first['next'])}")

    assert [r["team"]["name"] for r in second["rows"]] == ["team-3", "team-5"]
    assert [r["rank"] for r in second["rows"]] == [4, 5]
    assert (second["offset"], second["count"], second["next"]) == (3, 6, None)
    # A new walk sees the board as it is now.
    assert [r["team"]["name"] for r in _get(api_client, "?limit=6")["rows"]][:2] == [
        "team-4",
        "team-0",
    ]
