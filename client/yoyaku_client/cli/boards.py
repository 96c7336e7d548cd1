"""`yoyaku leaderboard --challenge SLUG --phase P [--split S]`: a phase's board (the
command itself is `leaderboard.leaderboard`)."""

from __future__ import annotations

from typing import Any

from yoyaku_client.cli.challenges import local_time
from yoyaku_client.client import Client
from yoyaku_client.ids import shortener
from yoyaku_client.output import Output


def show_phase_board(
    client: Client,
    output: Output,
    *,
    slug: str,
    phase: str,
    split: str | None,
    limit: int | None,
    as_json: bool,
) -> None:
    board = client.phase_leaderboard(slug, phase, split=split, limit=limit)
    if as_json:
        output.json(board)
        return
    columns: list[dict[str, Any]] = board.get("columns", [])
    rows: list[dict[str, Any]] = board.get("rows", [])
    short = shortener(r.get("submission_id") or "" for r in rows)

    def score(row: dict[str, Any], column: dict[str, Any]) -> str:
        value = (row.get("scores") or {}).get(column["key"])
        precision = column.get("precision")
        if isinstance(value, int | float) and isinstance(precision, int):
            return f"{value:.{precision}f}"
        return "-" if value is None else str(value)

    title = (
        f"{board.get('challenge')} / {board.get('phase')} / {board.get('split')}"
        f" ({board.get('count')} rows, scoring version {board.get('scoring_version')})"
    )
    output.table(
        title,
        ["rank", "team", *[c.get("label") or c["key"] for c in columns], "submission", "at"],
        [
            [
                "-" if r.get("rank") is None else r["rank"],
                "(baseline)" if r.get("baseline") else (r.get("team") or {}).get("name"),
                *[score(r, c) for c in columns],
                short(r.get("submission_id") or "-"),
                local_time(r.get("submitted_at")),
            ]
            for r in rows
        ],
    )
    if not rows:
        output.message("Nothing ranked yet on this board.")
