"""`yoyaku submit`: upload files and enqueue one job (the work is `submit.Submitter`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from yoyaku_client.cli.common import (
    EXIT_JOB_FAILED,
    EXIT_OK,
    CliExit,
    json_arg,
    json_option,
    open_client,
    output_for,
)
from yoyaku_client.output import (
    LineReporter,
    Output,
    ProgressReporter,
    QuietReporter,
    fmt,
)
from yoyaku_client.submit import RETRY_STATUSES, Reporter, SubmitOptions, Submitter

if TYPE_CHECKING:
    from yoyaku_client.client import Client
    from yoyaku_client.models import Job


def reporter_for(output: Output, progress: bool | None) -> Reporter:
    """Bars on a terminal (or everywhere with --progress: drawn for a terminal even into a
    file or pipe); lines otherwise; with --json only warnings."""
    if progress:
        return ProgressReporter(output, sys.stderr)
    if progress is None and sys.stderr.isatty():
        return ProgressReporter(output)
    if output.json_mode:
        return QuietReporter(output)
    return LineReporter(output)


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--entrypoint", default="main.py", show_default=True, help="The program to run.")
@click.option(
    "--config-file", default="config.yaml", show_default=True, help="Its configuration file."
)
@click.option("--question", "question_id", default="", help="Question (leaderboard) id.")
@click.option("--skill", default="", help="Skill (leaderboard) name.")
@click.option("--challenge", default="", help="A challenge's slug (with --phase).")
@click.option(
    "--phase",
    default="",
    help="The challenge's phase (a predictions phase takes its file types, and no program).",
)
@click.option("--metadata", help="Submission metadata, a JSON object.")
@click.option(
    "--resource-class",
    type=click.Choice(["small", "medium", "large"]),
    help="The job's resource class (its cost); the server's default when not given.",
)
@click.option("--job-config", help="The job's whole configuration, a JSON object.")
@click.option(
    "--reserve",
    is_flag=True,
    help="Hold a quota slot while uploading, so a long upload cannot end in a quota refusal.",
)
@click.option(
    "--reserve-ttl",
    default=300,
    show_default=True,
    type=click.IntRange(10, 3600),
    help="Seconds the slot is held between extensions.",
)
@click.option(
    "--idempotency-key",
    help="One key for the job, e.g. ci-$GITHUB_SHA (default: derived from you, the files' "
    "hashes and the configuration).",
)
@click.option(
    "--retry",
    is_flag=True,
    help="When these files (or this key) already ran and the job failed or was cancelled, run "
    "them again as a new job (running the same --retry command again finds that one job).",
)
@click.option("--wait", is_flag=True, help="Follow the job to its end.")
@click.option(
    "--timeout", type=click.FloatRange(min=0), help="With --wait: give up after S seconds."
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress bars (default: when stderr is a terminal).",
)
@click.option(
    "--parallel",
    default=2,
    show_default=True,
    type=click.IntRange(1, 8),
    help="Files sent at once after the first (1: one after the other).",
)
@click.option(
    "--skip-local-checks",
    is_flag=True,
    help="Send even what the client would refuse (the server then judges).",
)
@json_option
def submit(
    paths: tuple[Path, ...],
    entrypoint: str,
    config_file: str,
    question_id: str,
    skill: str,
    challenge: str,
    phase: str,
    metadata: str | None,
    resource_class: str | None,
    job_config: str | None,
    reserve: bool,
    reserve_ttl: int,
    idempotency_key: str | None,
    retry: bool,
    wait: bool,
    timeout: float | None,
    progress: bool | None,
    parallel: int,
    skip_local_checks: bool,
    as_json: bool,
) -> None:
    """Upload files (one per request) and enqueue one job.

    A folder is walked (files with an allowed extension: .py .yaml .zip .tar.gz). Running
    the same command again continues an interrupted upload, and never makes a second job:
    the idempotency key is derived from you, the files and the configuration.

    When these files already ran and their job failed or was cancelled, the command says so
    and exits 3 without a new job: add --retry to run them again.

    \b
    Examples:
      yoyaku submit examples/hello --wait
      yoyaku submit examples/hello --wait --retry
      yoyaku submit main.py config.yaml data.zip --question q1 --reserve
      yoyaku submit . --idempotency-key "ci-$GITHUB_SHA" --wait --timeout 900 --json
      yoyaku submit predictions/ --challenge digits --phase dev --wait
    """
    output = output_for(as_json)
    if bool(challenge) != bool(phase):
        raise click.UsageError("a challenge's phase needs both --challenge and --phase")
    if challenge and (question_id or skill):
        raise click.UsageError("--question and --skill are not for a challenge's phase")
    config = json_arg(job_config, "--job-config")
    if resource_class:
        config = {**(config or {}), "resource_class": resource_class}
    file_types: list[str] | None = None
    if challenge:
        with open_client(output) as client:
            file_types = predictions_file_types(client, challenge, phase)
        if file_types is not None:  # a predictions phase runs no program of yours
            entrypoint = config_file = ""
    options = SubmitOptions(
        paths=list(paths),
        entrypoint=entrypoint,
        config_file=config_file,
        question_id=question_id,
        skill=skill,
        metadata=json_arg(metadata, "--metadata") or {},
        job_config=config,
        idempotency_key=idempotency_key,
        reserve=reserve,
        reserve_ttl=reserve_ttl,
        local_checks=not skip_local_checks,
        retry=retry,
        challenge=challenge,
        phase=phase,
        file_types=file_types,
        parallel=parallel,
    )
    reporter = reporter_for(output, progress)
    try:
        with open_client(output) as client:
            result = Submitter(client, reporter).run(options)
            reporter.close()
            job = result.job
            uploaded = sum(1 for f in result.files if f.action != "already stored")
            code = EXIT_OK
            if result.matched_existing and job.status in RETRY_STATUSES:
                output.message(
                    f"This exact submission already ran: job {job.job_id} was {job.status} "
                    f"(submission {result.submission_id}, idempotency key "
                    f"{result.idempotency_key}). No new job was made; run the same command "
                    "with --retry to run it again."
                )
                code = EXIT_JOB_FAILED
            elif result.matched_existing:
                output.message(
                    f"Matched existing job {job.job_id} ({job.status}) of submission "
                    f"{result.submission_id}: idempotency key {result.idempotency_key}"
                )
            else:
                output.message(
                    f"Submission {result.submission_id}: {len(result.files)} files "
                    f"({uploaded} sent now, {len(result.files) - uploaded} already stored)"
                )
                note = " (a retry confirmed it after a lost answer)" if job.idempotent_hit else ""
                if result.retried:
                    note += f", a retry of job {result.retried[-1]}"
                output.message(f"Created job {job.job_id} ({job.status}){note}")
            for warning in job.quota_warnings:
                output.warning(warning)
            if job.cost_limit_warning:
                output.warning(f"Cost: {job.cost_limit_warning}")
            for path in result.left_out:
                output.message(f"left out (extension not allowed): {path}")
            document: dict[str, Any] = {
                "submission_id": result.submission_id,
                "job_id": job.job_id,
                "status": job.status,
                "idempotent_hit": job.idempotent_hit,
                "matched_existing": result.matched_existing,
                "resumed": result.resumed,
                "idempotency_key": result.idempotency_key,
                "reservation_id": result.reservation_id,
                "quota_warnings": job.quota_warnings,
                "cost_limit_warning": job.cost_limit_warning,
                "files": result.files,
                "left_out": result.left_out,
                "retried": result.retried,
            }
            if wait and code == EXIT_OK:
                from yoyaku_client.cli.jobs import follow_job

                final, code = follow_job(client, output, job.job_id, timeout)
                submission = client.get_submission(result.submission_id)
                document.update(
                    status=final.status,
                    job=final,
                    score=submission.score,
                    submission_status=submission.status,
                )
                _print_outcome(output, final, submission.score, submission.status)
            if as_json:
                output.json(document)
            elif not wait or code:
                output.print(job.job_id)
    finally:
        reporter.close()
    if code:
        raise CliExit(code)


def predictions_file_types(client: Client, slug: str, phase: str) -> list[str] | None:
    """The phase's file types when it is a predictions phase (None for a code phase or a
    phase the challenge does not have: the server then answers)."""
    for item in client.get_challenge(slug).get("phases", []):
        if item.get("slug") == phase and item.get("kind") == "predictions":
            return [str(t).lower() for t in item.get("file_types") or []] or None
    return None


def outcome_line(status: str, score: float | None, submission_status: str) -> str:
    """What `submit --wait` prints on stdout: `completed 1`, `failed -`, and for a grading
    whose score waits for a reviewer `completed, awaiting review (score 0.5 pending)`."""
    if status == "completed" and submission_status == "review_pending":
        pending = "" if score is None else f" (score {fmt(score)} pending)"
        return f"completed, awaiting review{pending}"
    return f"{status} {fmt(score)}"


def _print_outcome(output: Output, job: Job, score: float | None, submission_status: str) -> None:
    if job.status == "completed":
        if submission_status == "review_pending":
            output.message(
                f"Job {job.job_id} completed: the submission awaits a human review; its score "
                "counts once a reviewer approves it"
            )
        else:
            output.message(f"Job {job.job_id} completed: score {fmt(score)}")
    else:
        reason = f": {job.error}" if job.error else ""
        output.message(f"Job {job.job_id} {job.status}{reason}")
    if not output.json_mode:
        output.print(outcome_line(job.status, score, submission_status))
