"""`yoyaku challenges` and `yoyaku challenge show|push`: what there is to take part in, a
challenge's phases with what your team has left, and a host's bundle applied (or planned)."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path
from typing import Any

import click

from yoyaku_client.cli.common import json_option, open_client, output_for
from yoyaku_client.cli.submit import reporter_for
from yoyaku_client.client import Client
from yoyaku_client.config import ResumableState
from yoyaku_client.errors import NotFound
from yoyaku_client.output import Output, fmt
from yoyaku_client.submit import LocalFile


def local_time(value: str | None) -> str:
    """A server time (ISO 8601 with an offset) in local time, to the minute."""
    if not value:
        return "-"
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    return when.astimezone().strftime("%Y-%m-%d %H:%M %Z").strip()


def phase_open(phase: dict[str, Any], now: dt.datetime | None = None) -> bool:
    """Whether the phase takes submissions now (started, and not ended)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    start, end = phase.get("start"), phase.get("end")
    if start and dt.datetime.fromisoformat(start.replace("Z", "+00:00")) > now:
        return False
    return not (end and dt.datetime.fromisoformat(end.replace("Z", "+00:00")) <= now)


@click.command()
@json_option
def challenges(as_json: bool) -> None:
    """List the challenges you may see: public ones and those you host or take part in.

    \b
    Example:
      yoyaku challenges
      yoyaku challenge show digits
    """
    output = output_for(as_json)
    with open_client(output, need_token=False) as client:
        found = client.list_challenges()
    if as_json:
        output.json(found)
        return
    if not found:
        output.message("No challenge to show.")
        return
    output.table(
        None,
        ["slug", "title", "visibility", "participation", "phases"],
        [
            [
                c.get("slug"),
                c.get("title"),
                c.get("visibility"),
                c.get("participation"),
                ", ".join(p.get("slug", "") for p in c.get("phases", [])) or "-",
            ]
            for c in found
        ],
    )


@click.group()
def challenge() -> None:
    """A challenge: its phases and your team's limits (show), a host's bundle (push)."""


def _limits(client: Client, slug: str, phase: str, *, required: bool) -> dict[str, Any] | None:
    try:
        return client.phase_me(slug, phase)
    except NotFound:
        if required:
            raise
        return None  # in no team yet: nothing counted


@challenge.command("show")
@click.argument("slug")
@click.option("--phase", help="Only this phase, with your team's limits in it.")
@json_option
def challenge_show(slug: str, phase: str | None, as_json: bool) -> None:
    """Show a challenge: its phases with their dates (local time), and for --phase (or for
    each open phase) your team's limits there: allowed, used, remaining and when the daily
    count resets. Without a team the limits are not shown (you have used nothing).

    --json gives {"challenge": {...}, "me": {"<phase>": {...} | null}}.

    \b
    Examples:
      yoyaku challenge show digits
      yoyaku challenge show digits --phase dev --json
    """
    output = output_for(as_json)
    with open_client(output, need_token=False) as client:
        found = client.get_challenge(slug)
        phases = found.get("phases", [])
        if phase is not None and phase not in {p.get("slug") for p in phases}:
            raise click.BadParameter(
                f"{slug} has no phase {phase!r} (its phases: "
                f"{', '.join(p.get('slug', '') for p in phases)})",
                param_hint="--phase",
            )
        wanted = [phase] if phase else [p["slug"] for p in phases if phase_open(p)]
        me: dict[str, dict[str, Any] | None] = {}
        if "Authorization" in client.transport.http.headers:
            for name in wanted:
                me[name] = _limits(client, slug, name, required=False)
    if as_json:
        output.json({"challenge": found, "me": me})
        return
    output.fields(
        f"{found.get('title')} ({found.get('slug')})",
        [
            ("visibility", found.get("visibility")),
            ("participation", found.get("participation")),
            ("max team size", found.get("max_team_size")),
            ("bundle version", found.get("bundle_version")),
            ("hosts", ", ".join(str(h.get("username", h)) for h in found.get("hosts", [])) or "-"),
        ],
    )
    shown = [p for p in phases if phase is None or p.get("slug") == phase]
    output.table(
        "phases",
        ["phase", "title", "kind", "start", "end", "open", "splits", "reveal"],
        [
            [
                p.get("slug"),
                p.get("title"),
                p.get("kind"),
                local_time(p.get("start")),
                local_time(p.get("end")),
                phase_open(p),
                ", ".join(s.get("name", "") for s in p.get("splits", [])),
                "revealed" if p.get("revealed") else local_time(p.get("reveal_at")),
            ]
            for p in shown
        ],
    )
    for name, mine in me.items():
        if mine is None:
            output.message(f"phase {name}: you are in no team yet (nothing used)")
            continue
        show_limits(output, name, mine)


def show_limits(output: Output, phase: str, mine: dict[str, Any]) -> None:
    team = mine.get("team") or {}
    rows = []
    for kind in ("per_day", "total", "concurrent"):
        limit = (mine.get("limits") or {}).get(kind)
        if not limit:
            continue
        allowed = limit.get("allowed")
        rows.append(
            [
                kind,
                "no limit" if allowed is None else allowed,
                limit.get("used"),
                "-" if allowed is None else fmt(limit.get("remaining")),
                local_time(limit.get("resets_at")),
            ]
        )
    output.table(
        f"phase {phase}: team {team.get('name')}",
        ["limit", "allowed", "used", "remaining", "resets"],
        rows,
    )


@challenge.command("push")
@click.argument("bundle", type=click.Path(exists=True, path_type=Path))
@click.option("--dry-run", is_flag=True, help="Only show what would change; change nothing.")
@json_option
def challenge_push(bundle: Path, dry_run: bool, as_json: bool) -> None:
    """Apply a challenge bundle (a folder with challenge.yaml, zipped on the fly, or a .zip):
    creates the challenge, or applies a new version to one you host.

    --dry-run prints the plan as a diff: `+` create, `~` update (from → to), `-` delete.

    \b
    Examples:
      yoyaku challenge push examples/benchmarks/digits --dry-run
      yoyaku challenge push digits.zip
    """
    output = output_for(as_json)
    import tempfile  # here, not on every command's start (with shutil, bz2, lzma)

    with tempfile.TemporaryDirectory(prefix="yoyaku-bundle-") as scratch:
        path = _zipped(bundle, Path(scratch)) if bundle.is_dir() else bundle
        with open_client(output) as client:
            limits = client.upload_limits()
            big = path.stat().st_size > limits.max_upload_file_size
            if big and limits.max_resumable_upload_size is not None:
                status, answer = push_resumably(client, output, path, dry_run=dry_run)
            else:
                status, answer = client.push_bundle(path, dry_run=dry_run)
    if as_json:
        output.json(answer)
        return
    if dry_run:
        show_plan(output, answer)
        return
    verb = "Created" if status == 201 else "Applied"
    output.message(
        f"{verb} challenge {answer.get('slug')} (bundle version {answer.get('bundle_version')})"
    )
    output.print(str(answer.get("slug")))


#: The colour of each kind of plan line on a terminal (a pipe or a file gets no colour).
PLAN_STYLES = {"create": "green", "delete": "red", "update": "yellow"}


def push_resumably(
    client: Client, output: Output, path: Path, *, dry_run: bool
) -> tuple[int, dict[str, Any]]:
    """A bundle over MAX_UPLOAD_FILE_SIZE: a resumable upload (carried on from the server's
    offset when a killed run left one: the zip of an unchanged folder has the same bytes),
    then applied by its upload id."""
    with path.open("rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    item = LocalFile(path, path.name, path.stat().st_size, digest)
    state = ResumableState.load(client.base_url, client.me().username, digest, item.size)
    reporter = reporter_for(output, None)
    reporter.upload_started([item], 0)
    reporter.file_started(item, 1, 1)
    try:
        upload = client.upload_resumable(
            path,
            upload_id=state.upload_id or None,
            progress=lambda sent, total: reporter.file_progress(item, sent, total),
            on_created=state.save,
        )
        reporter.file_finished(item, 1, 1, created=True)
    finally:
        reporter.upload_finished()
        reporter.close()
    if upload.resumed_from:
        output.message(f"resumed the bundle's upload at byte {upload.resumed_from}")
    try:
        return client.push_bundle(None, dry_run=dry_run, upload_id=upload.upload_id)
    finally:
        state.forget()  # the server has judged these bytes (a killed run keeps the state)


def show_plan(output: Output, answer: dict[str, Any]) -> None:
    changes = [op for op in answer.get("plan", []) if op.get("op") != "unchanged"]
    output.message(f"Dry run for {answer.get('slug')}: {len(changes)} changes, nothing applied")
    for op in changes:
        kind, path = op.get("op"), op.get("path")
        style = PLAN_STYLES.get(str(kind), PLAN_STYLES["update"])
        if kind == "create":
            output.print(f"+ {path}: {brief(op.get('to'))}", style=style)
        elif kind == "delete":
            output.print(f"- {path}: {brief(op.get('from'))}", style=style)
        else:
            output.print(f"~ {path}: {brief(op.get('from'))} → {brief(op.get('to'))}", style=style)
    if not changes:
        output.print("no change")


def brief(value: Any, width: int = 72) -> str:
    """A plan value on one line: a whole phase or a long description is cut (`--json` has
    it whole)."""
    text = " ".join(fmt(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _zipped(folder: Path, scratch: Path) -> Path:
    """The folder as a zip (its files, paths relative to it; links are not followed)."""
    if not (folder / "challenge.yaml").is_file():
        raise click.BadParameter(f"{folder} has no challenge.yaml", param_hint="BUNDLE")
    target = scratch / f"{folder.resolve().name or 'bundle'}.zip"
    import zipfile  # here, not on every command's start

    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not path.is_symlink():
                archive.write(path, path.relative_to(folder).as_posix())
    return target
