"""Keyset pages of a leaderboard (SPEC §11.3 speed): a page's `next` cursor carries where the
page ended (`BoardState`), so the next page is one index range of the team-best order index
(`order_key` greater than the last row's) and the baselines' few rows, with no count and no
OFFSET: a page deep in the board costs what the first one does.

The cursor is untrusted input. It is signed (`django.core.signing`, its own salt) with the
phase, the split and the scoring version inside, so a forged, altered or foreign cursor (another
phase, split or version) is InvalidRequest, never a row of another board.
"""

from __future__ import annotations

from typing import Any

from django.core import signing

from apps.benchmarks.board_selectors import (
    _ROW,
    Board,
    BoardRow,
    BoardState,
    Row,
    _baseline_row,
    _baselines,
    _bests,
    _team_row,
    board_page,
)
from apps.benchmarks.models import Phase, Score
from apps.core.exceptions import InvalidRequest

_SALT = "yoyaku.benchmarks.board-cursor"
#: The longest cursor a query may carry (a board's cursor is about 300 characters).
CURSOR_MAX_LENGTH = 2000


def _invalid(reason: str) -> InvalidRequest:
    return InvalidRequest("Invalid cursor.", fields={"cursor": [reason]})


def cursor_dumps(*, board: Board, phase: Phase, state: BoardState) -> str:
    """The signed cursor of the page after `state` on `board`."""
    payload = [
        phase.pk,
        board.split,
        board.scoring_version,
        state.key,
        state.rank,
        state.metric,
        state.teams,
        state.baselines,
        state.count,
    ]
    return signing.dumps(payload, salt=_SALT, compress=True)


def cursor_loads(*, board: Board, phase: Phase, cursor: str) -> BoardState:
    """The state a cursor carries, if it was made by this server for `board` (its phase, split
    and scoring version); else InvalidRequest."""
    try:
        payload: Any = signing.loads(cursor, salt=_SALT)
    except (signing.BadSignature, ValueError, UnicodeError) as error:
        raise _invalid("Not a cursor this leaderboard gave.") from error
    if not isinstance(payload, list) or len(payload) != 9:
        raise _invalid("Not a cursor this leaderboard gave.")
    phase_id, split, version, key, rank, metric, teams, baselines, count = payload
    if [phase_id, split, version] != [phase.pk, board.split, board.scoring_version]:
        raise _invalid("The cursor belongs to another phase, split or scoring version.")
    return BoardState(
        key=key, rank=rank, metric=metric, teams=teams, baselines=baselines, count=count
    )


def _merged(teams: list[Row], baselines: list[Score], size: int) -> list[Row | Score]:
    """The first `size` rows of teams and baselines in `order_key` order (both sorted)."""
    merged: list[Row | Score] = []
    t = b = 0
    while len(merged) < size and (t < len(teams) or b < len(baselines)):
        if b < len(baselines) and (t == len(teams) or baselines[b].order_key < teams[t][0]):
            merged.append(baselines[b])
            b += 1
        else:
            merged.append(teams[t])
            t += 1
    return merged


def board_page_after(*, board: Board, phase: Phase, limit: int, state: BoardState) -> Board:
    """Fill `board` with the `limit` rows after `state`: team rows from one index range
    (`order_key > state.key`, one more than the page to know whether another follows) merged
    with the baselines after the key. A row ties the team row before it when their metric keys
    are equal (across the page boundary too), else its rank is its team position + 1. `count`
    is the count the walk began with: no page after the first counts."""
    teams: list[Row] = list(
        _bests(board, phase)
        .filter(order_key__gt=state.key)
        .order_by("order_key")
        .values_list(*_ROW)[: limit + 1]
    )
    pending = [score for score in _baselines(board, phase) if score.order_key > state.key]
    merged = _merged(teams, pending, limit + 1)
    rows: list[BoardRow] = []
    rank, metric, position, placed = state.rank, state.metric, state.teams, state.baselines
    for item in merged[:limit]:
        if isinstance(item, Score):
            rows.append(_baseline_row(item))
            placed += 1
            continue
        if item[1] != metric:
            rank = position + 1
        rows.append(_team_row(item, rank))
        metric = item[1]
        position += 1
    board.rows = rows
    board.count = state.count
    board.limit = limit
    board.offset = state.teams + state.baselines
    board.after = None
    if len(merged) > limit:
        board.after = BoardState(
            key=rows[-1].order_key,
            rank=rank,
            metric=metric,
            teams=position,
            baselines=placed,
            count=state.count,
        )
    return board


def board_read(
    *, board: Board, phase: Phase, limit: int, offset: int, cursor: str | None
) -> str | None:
    """Fill `board` with a page, by `cursor` when given, else by `offset`; returns the next
    page's cursor (None on the last page). A bad cursor is InvalidRequest."""
    if cursor is None:
        board_page(board=board, phase=phase, limit=limit, offset=offset)
    else:
        state = cursor_loads(board=board, phase=phase, cursor=cursor)
        board_page_after(board=board, phase=phase, limit=limit, state=state)
    if board.after is None:
        return None
    return cursor_dumps(board=board, phase=phase, state=board.after)
