"""`yoyaku submissions`: what you sent."""

from __future__ import annotations

import itertools

import click

from yoyaku_client.cli.common import json_option, open_client, output_for
from yoyaku_client.ids import shortener
from yoyaku_client.output import fmt, table_time

_STATUSES = ["draft", "pending", "processing", "completed", "review_pending", "failed"]


@click.command()
@click.option("--status", type=click.Choice(_STATUSES), help="Only submissions in this status.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@json_option
def submissions(status: str | None, limit: int, as_json: bool) -> None:
    """List your submissions, newest first: status, question, skill, score and files.

    A score in review_pending waits for a reviewer's verdict. Ids are shortened to a unique
    prefix; --json gives them whole.

    \b
    Examples:
      yoyaku submissions
      yoyaku submissions --status review_pending --json
    """
    output = output_for(as_json)
    with open_client(output) as client:
        found = client.iter_submissions(page_size=100)
        if status is not None:
            found = (s for s in found if s.status == status)
        rows = list(itertools.islice(found, limit))
    if as_json:
        output.json(rows)
        return
    short = shortener(s.submission_id for s in rows)
    output.table(
        None,
        ["submission", "status", "question", "skill", "score", "files", "created"],
        [
            [
                short(s.submission_id),
                s.status,
                s.question_id or None,
                s.skill or None,
                f"{fmt(s.score)} pending" if s.status == "review_pending" else s.score,
                len(s.files),
                table_time(s.created_at),
            ]
            for s in rows
        ],
    )
