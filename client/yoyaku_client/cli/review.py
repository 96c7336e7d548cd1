"""`yoyaku review ...` (reviewers): the queue, claims, verdicts; regrade (staff). `review show`
is in `cli.files`, beside `yoyaku download`."""

from __future__ import annotations

from typing import Any

import click

from yoyaku_client.cli.common import IdCommand, id_command, json_option, open_client, output_for
from yoyaku_client.cli.files import review_show
from yoyaku_client.client import Client
from yoyaku_client.ids import resolve_id, shortener
from yoyaku_client.models import Claim
from yoyaku_client.output import Output, fmt, table_time


@click.group()
def review() -> None:
    """Human review (reviewers): queue, claim, extend, release, complete; regrade (staff).

    \b
    Example:
      yoyaku review queue
      yoyaku review claim <submission>
      yoyaku review complete <submission> --approve --score 0.9 --comment "checked"
    """


def queued_id_arg(client: Client, given: str) -> str:
    """A submission id, or a unique prefix of one in the review queue."""
    return resolve_id(
        given,
        kind="submission awaiting review",
        candidates=lambda: [r.submission_id for r in client.review_queue(limit=500)],
    )


@review.command("queue")
@click.option("--limit", type=click.IntRange(1, 500), help="At most this many rows.")
@json_option
def review_queue(limit: int | None, as_json: bool) -> None:
    """Submissions awaiting review: unclaimed or expired first, then oldest first.

    \b
    Example:
      yoyaku review queue --json
    """
    output = output_for(as_json)
    with open_client(output) as client:
        rows = client.review_queue(limit=limit)
    if as_json:
        output.json(rows)
        return
    short = shortener(r.submission_id for r in rows)
    output.table(
        None,
        ["submission", "owner", "question", "skill", "score", "claimed by", "claim expires"],
        [
            [
                short(r.submission_id),
                r.owner.username if r.owner else None,
                r.question_id,
                r.skill,
                r.score,
                r.claimed_by.username if r.claimed_by else None,
                table_time(r.claim_expires_at) if r.claim_expires_at else None,
            ]
            for r in rows
        ],
    )


@review.command("complete")
@click.argument("submission_id")
@click.option("--approve", "verdict", flag_value="approve", help="Accept (completed).")
@click.option("--reject", "verdict", flag_value="reject", help="Refuse (failed).")
@click.option("--score", type=float, help="Your score (approve; else the grader's stays).")
@click.option("--comment", default="", help="Why.")
@json_option
def review_complete(
    submission_id: str, verdict: str | None, score: float | None, comment: str, as_json: bool
) -> None:
    """Record your verdict on a submission you claimed.

    \b
    Example:
      yoyaku review complete 5f2b7c0e9d8a4b1c8e3f6a7b9c0d1e2f --approve --score 0.8
    """
    if verdict is None:
        raise click.UsageError("give --approve or --reject")
    output = output_for(as_json)
    with open_client(output) as client:
        outcome = client.complete_review(
            queued_id_arg(client, submission_id), verdict=verdict, score=score, comment=comment
        )
    if as_json:
        output.json(outcome)
    else:
        output.print(f"{outcome.submission_id}: {outcome.status} (score {fmt(outcome.score)})")


def _claim_line(output: Output, claim: Claim) -> None:
    output.print(f"claimed {claim.submission_id} until {fmt(claim.claim_expires_at)}")


def _submission_id_arg(client: Client, given: str) -> str:
    return resolve_id(given, kind="submission")


REVIEW_COMMANDS: list[IdCommand[Any]] = [
    IdCommand(
        name="claim",
        argument="submission_id",
        resolve=queued_id_arg,
        call=Client.claim_review,
        show=_claim_line,
        help="""Claim a submission for review (yours already: extended).

        \b
        Example:
          yoyaku review claim 5f2b7c0e9d8a4b1c8e3f6a7b9c0d1e2f
        """,
    ),
    IdCommand(
        name="extend",
        argument="submission_id",
        resolve=queued_id_arg,
        call=Client.extend_review_claim,
        show=_claim_line,
        help="""Renew your live claim.

        \b
        Example:
          yoyaku review extend 5f2b7c0e9d8a4b1c8e3f6a7b9c0d1e2f
        """,
    ),
    IdCommand(
        name="release",
        argument="submission_id",
        resolve=queued_id_arg,
        call=Client.release_review_claim,
        show=lambda output, result: output.print(
            f"{result.submission_id}: {'released' if result.released else 'no claim'}"
        ),
        help="""Give up your claim.

        \b
        Example:
          yoyaku review release 5f2b7c0e9d8a4b1c8e3f6a7b9c0d1e2f
        """,
    ),
    IdCommand(
        name="regrade",
        argument="submission_id",
        resolve=_submission_id_arg,
        call=Client.regrade,
        show=lambda output, result: output.print(
            f"{result.submission_id}: {result.status}, job {result.job_id}"
        ),
        help="""Staff: grade a finished submission again (a new job, no quota charged).

        \b
        Example:
          yoyaku review regrade 5f2b7c0e9d8a4b1c8e3f6a7b9c0d1e2f
        """,
    ),
]
for _spec in REVIEW_COMMANDS:
    review.add_command(id_command(_spec))
review.add_command(review_show)
