"""Reads of a phase's leaderboard (SPEC §11.3): who may read which split, and its rows.

A leaderboard is `TeamBest` (one row per team, kept by the writers of scores) merged with the
phase's baseline scores. A page costs a bounded number of index reads whatever the size of the
board: the total (a count on the index range of (phase, version, split)), the `order_key` at
the page's offset (an index-only read), the page's rows from that key on (an index range with
their scores and teams), and the rank of the page's first row (a count of strictly better
keys on the `metric_key` index); the other ranks follow from the page itself. Never a scan of
all scores.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from django.conf import settings
from django.db.models import Count, Q, QuerySet

from apps.benchmarks.exceptions import LeaderboardLoginRequired, NotRevealed
from apps.benchmarks.models import (
    Challenge,
    Metric,
    Phase,
    Rescore,
    RescoreState,
    Score,
    ScoringVersion,
    Split,
    TeamBest,
    Visibility,
)
from apps.benchmarks.selectors import (
    AnyUser,
    challenge_get_seen,
    challenge_may_manage,
    challenge_seen_ids,
)
from apps.core.exceptions import InvalidRequest, NotFound

_EVERY_ROW = 2**31 - 1
#: Rows a CSV export reads per query while it streams.
CSV_CHUNK = 1000


@dataclass
class BoardAccess:
    challenge: Challenge
    phase: Phase
    user: AnyUser

    @cached_property
    def manage(self) -> bool:
        """A host of the challenge, or staff (asked only when it matters)."""
        return challenge_may_manage(challenge=self.challenge, user=self.user)


@dataclass(frozen=True)
class TeamRef:
    id: str
    name: str


@dataclass(frozen=True)
class BoardRow:
    rank: int | None
    team: TeamRef | None
    scores: dict[str, Any]
    submission_id: str | None
    submitted_at: datetime | None
    baseline: bool
    #: Where the row stands (never rendered): what a cursor after it holds.
    order_key: str = field(default="", repr=False, compare=False)
    metric_key: str = field(default="", repr=False, compare=False)


@dataclass(frozen=True)
class BoardState:
    """Where a page ended: the last row's `order_key`, the rank and `metric_key` of the last
    team row so far (0 and "" before any), the team and baseline rows so far, and the board's
    row count when the walk began. What a `next` cursor carries."""

    key: str
    rank: int
    metric: str
    teams: int
    baselines: int
    count: int


@dataclass
class Board:
    challenge: str
    phase: str
    split: str
    scoring_version: int
    revealed: bool
    columns: list[Metric]
    count: int = 0
    limit: int = 0
    offset: int = 0
    rows: list[BoardRow] = field(default_factory=list)
    #: Where this page ended, None on the last page.
    after: BoardState | None = None


def board_access(*, slug: str, phase_slug: str, user: AnyUser) -> BoardAccess:
    """The phase if the caller may read its leaderboard: a public challenge's while
    `LEADERBOARD_PUBLIC` is on (anyone, anonymous too), else the challenge's readers.
    Anonymous callers of any other leaderboard get LeaderboardLoginRequired (401, the same for
    an unknown or private challenge); a signed-in caller who may not see the challenge gets
    ChallengeNotFound (404); an unknown phase is NotFound. One query when the phase exists."""
    phases = Phase.objects.select_related("challenge").filter(challenge__slug=slug, slug=phase_slug)
    if user.is_authenticated:
        phase = phases.filter(challenge__in=challenge_seen_ids(user=user)).first()
        if phase is None:
            challenge_get_seen(slug=slug, user=user)  # 404 unless only the phase is unknown
            raise NotFound("No such phase.")
        return BoardAccess(challenge=phase.challenge, phase=phase, user=user)
    if not settings.LEADERBOARD_PUBLIC:
        raise LeaderboardLoginRequired()
    phase = phases.filter(challenge__visibility=Visibility.PUBLIC).first()
    if phase is None:
        if not Challenge.objects.filter(slug=slug, visibility=Visibility.PUBLIC).exists():
            raise LeaderboardLoginRequired()
        raise NotFound("No such phase.")
    return BoardAccess(challenge=phase.challenge, phase=phase, user=user)


#: A phase's metrics and splits by (phase, bundle version): only applying a bundle changes them,
#: and every apply that changes anything makes a new bundle version, so an entry never goes
#: stale; it spares a page two queries. Bounded: emptied when full.
_SHAPES: dict[tuple[str, int], tuple[list[Metric], dict[str, bool]]] = {}
_SHAPES_MAX = 512


def _shape(access: BoardAccess) -> tuple[list[Metric], dict[str, bool]]:
    key = (access.phase.pk, access.challenge.bundle_version)
    shape = _SHAPES.get(key)
    if shape is None:
        phase = access.phase
        metrics = list(Metric.objects.filter(phase=phase).order_by("order"))
        splits = dict(Split.objects.filter(phase=phase).order_by().values_list("name", "hidden"))
        shape = (metrics, splits)
        if len(_SHAPES) >= _SHAPES_MAX:
            _SHAPES.clear()
        _SHAPES[key] = shape
    return shape


def board_open(*, access: BoardAccess, split: str, scoring_version: int | None) -> Board:
    """The leaderboard's heading for `split` in `scoring_version` (default: the version the
    phase serves). An unknown split or version is InvalidRequest; a hidden split before the
    reveal is NotRevealed unless the caller manages the challenge. A version the phase never
    served (a rescore in progress, cancelled or superseded: its board holds the submissions
    scored so far and no others) is for hosts and staff only."""
    phase = access.phase
    columns, hidden = _shape(access)
    is_hidden = hidden.get(split)
    if is_hidden is None:
        raise InvalidRequest(
            "Unknown split.", fields={"split": [f"The phase has no split named {split!r}."]}
        )
    if is_hidden and phase.revealed_at is None and not access.manage:
        raise NotRevealed()
    version = phase.scoring_version if scoring_version is None else scoring_version
    known = ScoringVersion.objects.filter(phase=phase, number=version)
    if not access.manage:  # served: not newer than now, and switched to if it was rescored
        unserved = Rescore.objects.filter(phase=phase).exclude(state=RescoreState.SWITCHED)
        known = known.filter(number__lte=phase.scoring_version).exclude(
            number__in=unserved.values("version")
        )
    if scoring_version is not None and not known.exists():
        raise InvalidRequest(
            "Unknown scoring version.",
            fields={"scoring_version": [f"The phase has no scoring version {version}."]},
        )
    return Board(
        challenge=access.challenge.slug,
        phase=phase.slug,
        split=split,
        scoring_version=version,
        revealed=phase.revealed_at is not None,
        columns=columns,
    )


def _bests(board: Board, phase: Phase) -> QuerySet[TeamBest]:
    return TeamBest.objects.filter(phase=phase, version=board.scoring_version, split=board.split)


def _baselines(board: Board, phase: Phase) -> list[Score]:
    return list(
        # `team IS NULL` keeps the read on the scores' (phase, version, split, team) index to
        # the baselines' own range instead of every team's scores.
        Score.objects.filter(
            phase=phase,
            version=board.scoring_version,
            split=board.split,
            team__isnull=True,
            baseline__isnull=False,
        ).order_by("order_key")
    )


#: A team row as a page reads it: from the team-best index, its score and its team.
_ROW = (
    "order_key",
    "metric_key",
    "team_id",
    "team__name",
    "score__values",
    "score__entry_id",
    "score__submitted_at",
)
Row = tuple[str, str, str, str, dict[str, Any], str, datetime]


def _team_row(row: Row, rank: int) -> BoardRow:
    order, metric, team_id, name, values, entry_id, submitted_at = row
    return BoardRow(
        rank=rank,
        team=TeamRef(id=team_id, name=name),
        scores=dict(values),
        submission_id=entry_id,
        submitted_at=submitted_at,
        baseline=False,
        order_key=order,
        metric_key=metric,
    )


def _baseline_row(score: Score) -> BoardRow:
    return BoardRow(
        rank=None,
        team=None,
        scores=dict(score.values),
        submission_id=None,
        submitted_at=None,
        baseline=True,
        order_key=score.order_key,
    )


def _team_rows(bests: QuerySet[TeamBest], *, start: int, limit: int) -> list[Row]:
    """Team rows [start, start + limit) in order: past the first page, the key at `start` is
    read from the order index alone, then the rows from that key on."""
    if limit <= 0:
        return []
    ordered = bests.order_by("order_key")
    if start > 0:
        keys = list(ordered.values_list("order_key", flat=True)[start : start + 1])
        if not keys:
            return []
        ordered = ordered.filter(order_key__gte=keys[0])
    rows: list[Row] = list(ordered.values_list(*_ROW)[:limit])
    return rows


def _ranked(bests: QuerySet[TeamBest], rows: list[Row], start: int) -> list[BoardRow]:
    """Rows at team positions start, start+1, ...: a row ties the one before it when their
    metric keys are equal, else its rank is its position + 1 (every team before it is
    strictly better). Only the first row's rank needs a count, and only past the first row."""
    ranked: list[BoardRow] = []
    previous: str | None = None
    rank = 0
    for position, row in enumerate(rows, start=start):
        metric = row[1]
        if previous is None and position > 0:
            rank = bests.filter(metric_key__lt=metric).count() + 1
        elif metric != previous:
            rank = position + 1
        ranked.append(_team_row(row, rank))
        previous = metric
    return ranked


def _counts(bests: QuerySet[TeamBest], keys: list[str]) -> tuple[int, list[int]]:
    """The number of team rows, and for each of `keys` the number of team rows before it, in
    one walk of the order index: counted over a subquery ordered by `order_key` with a limit,
    which PostgreSQL answers from the index alone; for a board that is a large part of the
    table (a phase with two splits) its planner otherwise reads the whole table, several times
    slower."""
    ordered = bests.order_by("order_key").values("order_key")[:_EVERY_ROW]
    before = {
        f"b{i}": Count("order_key", filter=Q(order_key__lt=key)) for i, key in enumerate(keys)
    }
    totals = ordered.aggregate(teams=Count("order_key"), **before)
    return totals["teams"], [totals[f"b{i}"] for i in range(len(keys))]


def board_page(*, board: Board, phase: Phase, limit: int, offset: int) -> Board:
    """Fill `board` with the rows [offset, offset + limit) of teams and baselines merged in
    order, and the total count."""
    bests = _bests(board, phase)
    baselines = _baselines(board, phase)
    teams, before_each = _counts(bests, [score.order_key for score in baselines])
    # Where each baseline stands among all rows: after every team with a smaller order key.
    positions = [count + index for index, count in enumerate(before_each)]
    window = range(offset, offset + limit)
    before = sum(1 for at in positions if at < offset)
    inside = [(at, score) for at, score in zip(positions, baselines, strict=True) if at in window]
    start = offset - before
    team_rows = _team_rows(bests, start=start, limit=limit - len(inside))
    rows = _ranked(bests, team_rows, start)
    for at, score in inside:
        rows.insert(at - offset, _baseline_row(score))
    board.rows = rows[:limit]
    board.count = teams + len(baselines)
    board.limit = limit
    board.offset = offset
    if board.rows and offset + len(board.rows) < board.count:
        placed = before + sum(1 for row in board.rows if row.baseline)
        board.after = _state_after(bests, board, teams=offset + len(board.rows) - placed)
    return board


def _state_after(bests: QuerySet[TeamBest], board: Board, *, teams: int) -> BoardState:
    """The state after an offset page that has `teams` team rows up to its end. A page of
    baselines alone reads the team row before it (its key and rank: two index reads)."""
    last_team = next((row for row in reversed(board.rows) if not row.baseline), None)
    if last_team is None and teams > 0:
        (row,) = _team_rows(bests, start=teams - 1, limit=1)
        (last_team,) = _ranked(bests, [row], teams - 1)
    return BoardState(
        key=board.rows[-1].order_key,
        rank=(last_team.rank or 0) if last_team else 0,
        metric=last_team.metric_key if last_team else "",
        teams=teams,
        baselines=board.offset + len(board.rows) - teams,
        count=board.count,
    )


def board_stream(
    *, board: Board, phase: Phase, offset: int, limit: int | None
) -> Iterator[BoardRow]:
    """Every row from `offset` on (at most `limit`), read `CSV_CHUNK` team rows at a time by
    key (`order_key` after the last one read), for a streamed export."""
    bests = _bests(board, phase)
    pending = _baselines(board, phase)
    emitted = 0
    skipped = 0
    position = 0  # team rows produced so far
    rank = 0
    last_key: str | None = None
    last_metric: str | None = None
    while True:
        chunk_query = bests.order_by("order_key")
        if last_key is not None:
            chunk_query = chunk_query.filter(order_key__gt=last_key)
        chunk: list[Row] = list(chunk_query.values_list(*_ROW)[:CSV_CHUNK])
        for best in chunk:
            order, metric = best[0], best[1]
            while pending and pending[0].order_key < order:
                row = _baseline_row(pending.pop(0))
                if skipped < offset:
                    skipped += 1
                else:
                    yield row
                    emitted += 1
                if limit is not None and emitted >= limit:
                    return
            if metric != last_metric:
                rank = position + 1
            position += 1
            last_key, last_metric = order, metric
            if skipped < offset:
                skipped += 1
                continue
            yield _team_row(best, rank)
            emitted += 1
            if limit is not None and emitted >= limit:
                return
        if len(chunk) < CSV_CHUNK:
            break
    for score in pending:
        if skipped < offset:
            skipped += 1
            continue
        if limit is not None and emitted >= limit:
            return
        yield _baseline_row(score)
        emitted += 1
