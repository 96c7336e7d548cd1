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
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from apps.benchmarks.exceptions import LeaderboardLoginRequired, NotRevealed
from apps.benchmarks.models import (
    Challenge,
    Metric,
    Phase,
    Score,
    ScoringVersion,
    Split,
    Team,
    TeamBest,
    Visibility,
)
from apps.benchmarks.selectors import AnyUser, challenge_get_seen, challenge_may_manage
from apps.core.exceptions import InvalidRequest, NotFound

#: Rows a CSV export reads per query while it streams.
CSV_CHUNK = 1000


@dataclass(frozen=True)
class BoardAccess:
    challenge: Challenge
    phase: Phase
    manage: bool  # a host of the challenge, or staff


@dataclass(frozen=True)
class BoardRow:
    rank: int | None
    team: Team | None
    scores: dict[str, Any]
    submission_id: str | None
    submitted_at: datetime | None
    baseline: bool


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


def board_access(*, slug: str, phase_slug: str, user: AnyUser) -> BoardAccess:
    """The phase if the caller may read its leaderboard: a public challenge's while
    `LEADERBOARD_PUBLIC` is on (anyone, anonymous too), else the challenge's readers.
    Anonymous callers of any other leaderboard get LeaderboardLoginRequired (401, the same for
    an unknown or private challenge); a signed-in caller who may not see the challenge gets
    ChallengeNotFound (404); an unknown phase is NotFound."""
    if user.is_authenticated:
        challenge = challenge_get_seen(slug=slug, user=user)
    else:
        found = None
        if settings.LEADERBOARD_PUBLIC:
            found = Challenge.objects.filter(slug=slug, visibility=Visibility.PUBLIC).first()
        if found is None:
            raise LeaderboardLoginRequired()
        challenge = found
    phase = Phase.objects.filter(challenge=challenge, slug=phase_slug).first()
    if phase is None:
        raise NotFound("No such phase.")
    return BoardAccess(
        challenge=challenge,
        phase=phase,
        manage=challenge_may_manage(challenge=challenge, user=user),
    )


def board_open(*, access: BoardAccess, split: str, scoring_version: int | None) -> Board:
    """The leaderboard's heading for `split` in `scoring_version` (default: the version the
    phase serves). An unknown split or version is InvalidRequest; a hidden split before the
    reveal is NotRevealed unless the caller manages the challenge. A version newer than the
    one served (a rescore in progress) is for hosts and staff only."""
    phase = access.phase
    hidden = Split.objects.filter(phase=phase, name=split).values_list("hidden", flat=True)
    is_hidden = hidden.first()
    if is_hidden is None:
        raise InvalidRequest(
            "Unknown split.", fields={"split": [f"The phase has no split named {split!r}."]}
        )
    if is_hidden and phase.revealed_at is None and not access.manage:
        raise NotRevealed()
    version = phase.scoring_version if scoring_version is None else scoring_version
    known = ScoringVersion.objects.filter(phase=phase, number=version).exists()
    if scoring_version is not None and (
        not known or (version > phase.scoring_version and not access.manage)
    ):
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
        columns=list(Metric.objects.filter(phase=phase).order_by("order")),
    )


def _bests(board: Board, phase: Phase) -> QuerySet[TeamBest]:
    return TeamBest.objects.filter(phase=phase, version=board.scoring_version, split=board.split)


def _baselines(board: Board, phase: Phase) -> list[Score]:
    return list(
        Score.objects.filter(
            phase=phase,
            version=board.scoring_version,
            split=board.split,
            baseline__isnull=False,
        ).order_by("order_key")
    )


def _team_row(best: TeamBest, rank: int) -> BoardRow:
    score = best.score
    return BoardRow(
        rank=rank,
        team=best.team,
        scores=dict(score.values),
        submission_id=score.entry_id,
        submitted_at=score.submitted_at,
        baseline=False,
    )


def _baseline_row(score: Score) -> BoardRow:
    return BoardRow(
        rank=None,
        team=None,
        scores=dict(score.values),
        submission_id=None,
        submitted_at=None,
        baseline=True,
    )


def _team_rows(bests: QuerySet[TeamBest], *, start: int, limit: int) -> list[TeamBest]:
    """Team rows [start, start + limit) in order: the key at `start` is read from the order
    index alone, then the rows from that key on."""
    if limit <= 0:
        return []
    first_key = bests.order_by("order_key").values_list("order_key", flat=True)[start : start + 1]
    keys = list(first_key)
    if not keys:
        return []
    return list(
        bests.filter(order_key__gte=keys[0])
        .select_related("score", "team")
        .order_by("order_key")[:limit]
    )


def _ranked(bests: QuerySet[TeamBest], rows: list[TeamBest], start: int) -> list[BoardRow]:
    """Rows at team positions start, start+1, ...: a row ties the one before it when their
    metric keys are equal, else its rank is its position + 1 (every team before it is
    strictly better). Only the first row's rank needs a count."""
    ranked: list[BoardRow] = []
    previous: TeamBest | None = None
    rank = 0
    for position, best in enumerate(rows, start=start):
        if previous is not None and best.metric_key == previous.metric_key:
            pass
        elif previous is None and position > 0:
            rank = bests.filter(metric_key__lt=best.metric_key).count() + 1
        else:
            rank = position + 1
        ranked.append(_team_row(best, rank))
        previous = best
    return ranked


def board_page(*, board: Board, phase: Phase, limit: int, offset: int) -> Board:
    """Fill `board` with the rows [offset, offset + limit) of teams and baselines merged in
    order, and the total count."""
    bests = _bests(board, phase)
    baselines = _baselines(board, phase)
    teams = bests.count()
    # Where each baseline stands among all rows: after every team with a smaller order key.
    positions = [
        bests.filter(order_key__lt=score.order_key).count() + index
        for index, score in enumerate(baselines)
    ]
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
    return board


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
        chunk_query = bests.select_related("score", "team").order_by("order_key")
        if last_key is not None:
            chunk_query = chunk_query.filter(order_key__gt=last_key)
        chunk = list(chunk_query[:CSV_CHUNK])
        for best in chunk:
            while pending and pending[0].order_key < best.order_key:
                row = _baseline_row(pending.pop(0))
                if skipped < offset:
                    skipped += 1
                else:
                    yield row
                    emitted += 1
                if limit is not None and emitted >= limit:
                    return
            if best.metric_key != last_metric:
                rank = position + 1
            position += 1
            last_key, last_metric = best.order_key, best.metric_key
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
