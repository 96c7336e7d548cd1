"""`yoyaku leaderboard` and `yoyaku questions`: the ranking, and what there is to rank (no
login needed while the leaderboard is public)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from yoyaku_client.cli.boards import show_phase_board
from yoyaku_client.cli.common import json_option, open_client, output_for
from yoyaku_client.ids import shortener
from yoyaku_client.models import to_jsonable
from yoyaku_client.output import Output, table_time


@click.command()
@click.option(
    "--question", "question_id", help="This question's board (default: one board per question)."
)
@click.option("--skill", help="Only this skill.")
@click.option("--challenge", "challenge_slug", help="A challenge's board (with --phase).")
@click.option("--phase", help="The challenge's phase.")
@click.option("--split", help="The phase's split (default: public).")
@click.option(
    "--limit",
    type=click.IntRange(1, 1000),
    help="At most this many rows (default: 100 for one question, 10 per board without one).",
)
@json_option
def leaderboard(
    question_id: str | None,
    skill: str | None,
    challenge_slug: str | None,
    phase: str | None,
    split: str | None,
    limit: int | None,
    as_json: bool,
) -> None:
    """Best completed score per user, ranked, for each question on its own (no login needed
    while it is public).

    Without --question: one board per question (its top 10; `yoyaku questions` lists them),
    and --json gives [{"question_id", "skills", "users", "best_score", "rows": [...]}]. With
    --question: that board, and --json gives its rows. Submissions sent without a question
    are ranked together as the question "" (--question "").

    \b
    Examples:
      yoyaku leaderboard
      yoyaku leaderboard --question q1 --skill reading
      yoyaku leaderboard --challenge digits --phase dev --split public

    With --challenge and --phase: that phase's board of one split (teams and baselines,
    one column per metric); --json gives the server's board as it is.
    """
    output = output_for(as_json)
    if challenge_slug is not None or phase is not None or split is not None:
        if not challenge_slug or not phase:
            raise click.UsageError("a challenge's board needs both --challenge and --phase")
        with open_client(output, need_token=False) as client:
            show_phase_board(
                client,
                output,
                slug=challenge_slug,
                phase=phase,
                split=split,
                limit=limit,
                as_json=as_json,
            )
        return
    with open_client(output, need_token=False) as client:
        if question_id is not None:
            rows = client.leaderboard(question_id=question_id, skill=skill, limit=limit)
            if as_json:
                output.json(rows)
            else:
                _leaderboard_table(output, None, rows)
            return
        questions = client.leaderboard_questions()
        if skill is not None:
            questions = [q for q in questions if skill in q.skills]
        boards = [
            (q, client.leaderboard(question_id=q.question_id, skill=skill, limit=limit or 10))
            for q in questions
        ]
    if as_json:
        output.json([{**to_jsonable(q), "rows": rows} for q, rows in boards])
        return
    if not boards:
        output.message("No scored submission yet: nothing is ranked.")
    for q, rows in boards:
        name = f"question {q.question_id}" if q.question_id else "no question"
        skills = ", ".join(x or "-" for x in q.skills)
        _leaderboard_table(output, f"{name} (skills: {skills}; {q.users} ranked)", rows)


def _leaderboard_table(output: Output, title: str | None, rows: Sequence[Any]) -> None:
    short = shortener(r.submission_id for r in rows)
    output.table(
        title,
        ["rank", "user", "score", "submission", "completed"],
        [
            [r.rank, r.user.username, r.score, short(r.submission_id), table_time(r.completed_at)]
            for r in rows
        ],
    )


@click.command()
@json_option
def questions(as_json: bool) -> None:
    """List the questions that have a leaderboard, with their skills, how many users are
    ranked and the best score (no login needed while the leaderboard is public).

    \b
    Example:
      yoyaku questions
      yoyaku leaderboard --question q1
    """
    output = output_for(as_json)
    with open_client(output, need_token=False) as client:
        found = client.leaderboard_questions()
    if as_json:
        output.json(found)
        return
    if not found:
        output.message("No scored submission yet: no question has a leaderboard.")
        return
    output.table(
        None,
        ["question", "skills", "users", "best score"],
        [
            [
                q.question_id or "(none)",
                ", ".join(x or "-" for x in q.skills),
                q.users,
                q.best_score,
            ]
            for q in found
        ],
    )
