"""`yoyaku review show ID` and `yoyaku download SUBMISSION_ID [FILE]`: what a submission holds,
for its owner and for a reviewer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click

from yoyaku_client.cli.common import json_option, open_client, output_for
from yoyaku_client.client import Client
from yoyaku_client.errors import ApiError, YoyakuError
from yoyaku_client.files import StoredFile
from yoyaku_client.ids import resolve_id
from yoyaku_client.models import to_jsonable
from yoyaku_client.output import Output, size, terminal_safe


def _submission_id(client: Client, given: str) -> str:
    """A submission id, or a unique prefix of one of the caller's submissions or of one in the
    review queue (a reviewer's)."""

    def candidates() -> Iterator[str]:
        for submission in client.iter_submissions(page_size=100):
            yield submission.submission_id
        try:
            queue = client.review_queue(limit=500)
        except ApiError:  # not a reviewer: their own submissions are all there is
            return
        for row in queue:
            yield row.submission_id

    return resolve_id(given, kind="submission", candidates=candidates)


@click.command("show")
@click.argument("submission_id")
@json_option
def review_show(submission_id: str, as_json: bool) -> None:
    """Show a submission as a reviewer reads it: its files (an archive's members listed), the
    grader's output and every grading attempt.

    \b
    Example:
      yoyaku review show 3f2a9c0e5b7d4e1f8a6b2c9d0e1f2a3b
    """
    output = output_for(as_json)
    with open_client(output) as client:
        detail = client.review_submission(_submission_id(client, submission_id))
    if as_json:
        output.json(detail)
        return
    owner = detail.owner.username if detail.owner else None
    reason = f" ({detail.status_reason})" if detail.status_reason else ""
    output.fields(
        f"submission {detail.id}",
        [
            ("owner", owner),
            ("status", detail.status + reason),
            ("score", detail.score),
            ("question", detail.question_id),
            ("skill", detail.skill),
            ("entrypoint", detail.entrypoint),
            ("config file", detail.config_file),
        ],
    )
    output.table(
        "files",
        ["id", "name", "size", "sha256"],
        [[f.id, f.filename, size(f.size), f.sha256[:12]] for f in detail.files],
    )
    for file in detail.files:
        if file.members is not None:
            output.table(
                f"members of {file.filename}",
                ["name", "type", "size"],
                [[m.name, m.type, size(m.size)] for m in file.members],
            )
        elif file.members_problem:
            output.message(f"{file.filename}: members not listed: {file.members_problem}")
    output.print("grader output:")
    output.write(terminal_safe(detail.logs or detail.error or "(no output)\n"))
    if detail.logs and not detail.logs.endswith("\n"):
        output.write("\n")
    output.table(
        "grading attempts",
        ["#", "outcome", "exit", "score", "reason"],
        [[a.number, a.outcome, a.exit_code, a.score, a.reason] for a in detail.attempts],
    )


def _files(client: Client, submission_id: str) -> tuple[list[StoredFile], bool]:
    """The submission's files and whether they come through the review API: the owner's list
    first; a reviewer reading someone else's submission with a token that holds `review` but
    not `read` goes through the review API instead."""
    try:
        data = client._json("GET", f"/submissions/{submission_id}/files/")
    except ApiError as exc:
        if exc.code not in ("insufficient_scope", "permission_denied"):
            raise
        try:
            return client.review_submission(submission_id).files, True
        except ApiError:
            raise exc from None
    return [StoredFile.from_api(f) for f in data.get("files") or []], False


def _pick(files: list[StoredFile], wanted: str | None) -> list[StoredFile]:
    if wanted is None:
        return files
    chosen = [f for f in files if f.filename == wanted or str(f.id) == wanted]
    if not chosen:
        raise YoyakuError(f"No file {terminal_safe(wanted)!r} in this submission.")
    return chosen


@click.command("download")
@click.argument("submission_id")
@click.argument("file", required=False)
@click.option(
    "-o",
    "--output-dir",
    "output_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="The folder to write into (created if missing).",
)
@json_option
def download(submission_id: str, file: str | None, output_dir: Path, as_json: bool) -> None:
    """Download a submission's files (yours, or one you review): FILE by name or id, or every
    file. Each is checked against its sha256 and saved under its own plain name in the
    folder; a name the server gives that is not a plain file name is refused, never followed.

    \b
    Examples:
      yoyaku download 3f2a9c0e5b7d4e1f8a6b2c9d0e1f2a3b
      yoyaku download 3f2a9c0e5b7d4e1f8a6b2c9d0e1f2a3b answers.zip -o review/
    """
    output: Output = output_for(as_json)
    saved: list[dict[str, object]] = []
    with open_client(output) as client:
        submission_id = _submission_id(client, submission_id)
        files, through_review = _files(client, submission_id)
        for stored in _pick(files, file):
            path = client.download_file(
                submission_id,
                stored.id,
                output_dir,
                review=through_review,
                name=stored.filename,
            )
            saved.append({"id": stored.id, "filename": stored.filename, "path": str(path)})
            if not as_json:
                output.message(f"saved {path} ({size(stored.size)})")
    if as_json:
        output.json(to_jsonable(saved))
