"""`yoyaku team create|join|show` (a team in a challenge) and `yoyaku final select|unselect`
(the submissions a hidden split ranks)."""

from __future__ import annotations

from typing import Any

import click

from yoyaku_client.cli.common import json_option, open_client, output_for
from yoyaku_client.client import Client
from yoyaku_client.ids import resolve_id
from yoyaku_client.output import Output

CHALLENGE = click.option("--challenge", "slug", required=True, help="The challenge's slug.")


@click.group()
def team() -> None:
    """Your team in a challenge: create one, join one with its invite code, show it."""


def _show_team(output: Output, found: dict[str, Any], as_json: bool, verb: str) -> None:
    if as_json:
        output.json(found)
        return
    if verb:
        output.message(f"{verb} team {found.get('name')}")
    output.fields(
        f"team {found.get('name')}",
        [
            ("id", found.get("id")),
            ("members", ", ".join(m.get("username", "") for m in found.get("members", []))),
            ("invite code", found.get("invite_code")),
        ],
    )


@team.command("create")
@click.argument("name")
@CHALLENGE
@json_option
def team_create(name: str, slug: str, as_json: bool) -> None:
    """Create a team NAME in the challenge, with you in it; its invite code lets others join.

    \b
    Example:
      yoyaku team create "Pixel pushers" --challenge digits
    """
    output = output_for(as_json)
    with open_client(output) as client:
        found = client.create_team(slug, name)
    _show_team(output, found, as_json, "Created")


@team.command("join")
@click.argument("code")
@CHALLENGE
@json_option
def team_join(code: str, slug: str, as_json: bool) -> None:
    """Join the challenge's team whose invite code is CODE.

    \b
    Example:
      yoyaku team join 4f9c2a --challenge digits
    """
    output = output_for(as_json)
    with open_client(output) as client:
        found = client.join_team(slug, code)
    _show_team(output, found, as_json, "Joined")


@team.command("show")
@CHALLENGE
@json_option
def team_show(slug: str, as_json: bool) -> None:
    """Show your team in the challenge: its members and invite code (404 when in none).

    \b
    Example:
      yoyaku team show --challenge digits
    """
    output = output_for(as_json)
    with open_client(output) as client:
        found = client.my_team(slug)
    _show_team(output, found, as_json, "")


@click.group()
def final() -> None:
    """Choose the submissions a phase's hidden splits rank your team by."""


def _final(submission: str, selected: bool, as_json: bool) -> None:
    output = output_for(as_json)
    with open_client(output) as client:
        answer = client.set_final(_resolve(client, submission), selected)
    if as_json:
        output.json(answer)
        return
    state = "is a final" if answer.get("final") else "is not a final"
    output.message(
        f"Submission {answer.get('submission_id')} {state}; the team's finals: "
        f"{len(answer.get('finals', []))} of {answer.get('final_selection')}"
    )
    for item in answer.get("finals", []):
        output.print(str(item))


def _resolve(client: Client, given: str) -> str:
    return resolve_id(
        given,
        kind="submission",
        candidates=lambda: (s.submission_id for s in client.iter_submissions(page_size=100)),
    )


@final.command("select")
@click.argument("submission")
@json_option
def final_select(submission: str, as_json: bool) -> None:
    """Make SUBMISSION (an id or a unique prefix) one of your team's finals.

    \b
    Example:
      yoyaku final select 3f2a9c1e
    """
    _final(submission, True, as_json)


@final.command("unselect")
@click.argument("submission")
@json_option
def final_unselect(submission: str, as_json: bool) -> None:
    """Make SUBMISSION no longer one of your team's finals."""
    _final(submission, False, as_json)
