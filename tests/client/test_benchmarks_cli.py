"""The benchmark commands of `yoyaku` (the real console script against a live server): a
host pushes a bundle (a folder, zipped on the fly; the dry run as a diff), participants list
and show the challenge with their team's limits, make and join a team, submit predictions to
a phase until its limit refuses with exit 4, read the phase's board and choose finals."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import yaml

from apps.benchmarks.models import Challenge
from tests.benchmarks.bundles import EXAMPLE, grant_add_challenge
from tests.client.conftest import Cli, token_for, write_files
from tests.factories.users import make_user

PREDICTIONS = "id,label\n0,1\n1,1\n"


def _bundle_folder(tmp_path: Path, *, per_day: int) -> Path:
    folder = tmp_path / f"digits-{per_day}"
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(EXAMPLE, folder)
    document: dict[str, Any] = yaml.safe_load((folder / "challenge.yaml").read_text())
    document["phases"][0]["limits"]["per_day"] = per_day
    (folder / "challenge.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    return folder


def _participate(cli: Cli) -> None:
    answer = httpx.post(
        f"{cli.url}/api/challenges/digits/participate/",
        headers={"Authorization": f"Bearer {cli.token}"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "approved"


def _host(cli: Cli) -> Cli:
    return cli.as_user(token_for(grant_add_challenge(make_user(username="hana"))))


def test_push_dry_run_prints_a_diff_and_changes_nothing(cli: Cli, tmp_path: Path) -> None:
    host = _host(cli)
    folder = _bundle_folder(tmp_path, per_day=5)
    planned = host.run("challenge", "push", str(folder), "--dry-run")
    assert planned.code == 0, planned.stderr
    lines = planned.stdout.splitlines()
    assert "+ visibility: public" in lines
    assert any(line.startswith("+ phases.dev: {") for line in lines)
    assert all(line[:2] in ("+ ", "~ ", "- ") and len(line) < 160 for line in lines)
    assert not Challenge.objects.exists()

    created = host.json("challenge", "push", str(folder))
    assert created["slug"] == "digits"
    assert Challenge.objects.filter(slug="digits").exists()

    changed = _bundle_folder(tmp_path, per_day=7)
    diff = host.run("challenge", "push", str(changed), "--dry-run")
    assert diff.code == 0, diff.stderr
    assert "~ phases.dev.limits.per_day: 5 → 7" in diff.stdout
    shown = host.json("challenge", "show", "digits", "--phase", "dev")
    assert shown["challenge"]["phases"][0]["limits"]["per_day"] == 5

    same = host.run("challenge", "push", str(folder), "--dry-run")
    assert same.code == 0, same.stderr
    assert "no change" in same.stdout


def test_push_refusals_keep_the_contract_codes(cli: Cli, tmp_path: Path) -> None:
    empty = write_files(tmp_path / "empty", {"README.md": "nothing"})
    usage = cli.run("challenge", "push", str(empty))
    assert usage.code == 2
    assert "challenge.yaml" in usage.stderr
    bad = _bundle_folder(tmp_path, per_day=5)
    (bad / "challenge.yaml").write_text("slug: digits\nphases: nope\n")
    refused = _host(cli).json("challenge", "push", str(bad), expect=1)
    assert refused["code"] == "invalid_bundle"
    forbidden = cli.json("challenge", "push", str(_bundle_folder(tmp_path, per_day=5)), expect=1)
    assert forbidden["code"] == "permission_denied"
    assert not Challenge.objects.exists()


def test_a_team_submits_until_its_phase_limit_refuses(cli: Cli, tmp_path: Path) -> None:
    _host(cli).json("challenge", "push", str(_bundle_folder(tmp_path, per_day=1)))
    listed = cli.json("challenges")
    assert [c["slug"] for c in listed] == ["digits"]
    table = cli.run("challenges")
    assert table.code == 0
    assert "digits" in table.stdout

    _participate(cli)
    made = cli.json("team", "create", "Pixel pushers", "--challenge", "digits")
    assert made["name"] == "Pixel pushers"
    assert made["invite_code"]
    friend = cli.as_user(token_for(make_user(username="friend")))
    _participate(friend)
    joined = friend.json("team", "join", made["invite_code"], "--challenge", "digits")
    assert joined["id"] == made["id"]
    shown = cli.json("team", "show", "--challenge", "digits")
    assert sorted(m["username"] for m in shown["members"]) == ["friend", "researcher"]
    taken = friend.json("team", "create", "Other", "--challenge", "digits", expect=1)
    assert taken["code"] == "already_in_team"

    before = cli.json("challenge", "show", "digits", "--phase", "dev")
    per_day = before["me"]["dev"]["limits"]["per_day"]
    assert (per_day["allowed"], per_day["used"], per_day["remaining"]) == (1, 0, 1)
    assert per_day["resets_at"]
    text = cli.run("challenge", "show", "digits")
    assert text.code == 0, text.stderr
    for word in ("dev", "code", "per_day", "Pixel pushers"):
        assert word in text.stdout, text.stdout

    first = write_files(tmp_path / "one", {"predictions.csv": PREDICTIONS, "notes.txt": "x"})
    sent = cli.json("submit", str(first), "--challenge", "digits", "--phase", "dev")
    assert sent["status"] == "queued"
    assert sent["left_out"] == [str(first / "notes.txt")]
    again = cli.json("submit", str(first), "--challenge", "digits", "--phase", "dev")
    assert again["job_id"] == sent["job_id"]
    assert again["matched_existing"]

    second = write_files(tmp_path / "two", {"predictions.csv": PREDICTIONS + "2,1\n"})
    refused = friend.json(
        "submit", str(second), "--challenge", "digits", "--phase", "dev", expect=4
    )
    assert refused["code"] == "phase_limit_exceeded"
    assert refused["limit"] == "per_day"

    program = cli.json("submit", "examples/hello", "--challenge", "digits", "--phase", "code")
    assert program["status"] == "queued"
    no_csv = cli.json(
        "submit", "examples/hello", "--challenge", "digits", "--phase", "dev", expect=1
    )
    assert no_csv["code"] == "refused_locally"

    after = cli.json("challenge", "show", "digits", "--phase", "dev")
    assert after["me"]["dev"]["limits"]["per_day"]["used"] == 1

    board = cli.json("leaderboard", "--challenge", "digits", "--phase", "dev")
    assert [c["key"] for c in board["columns"]] == ["accuracy", "errors"]
    drawn = cli.run("leaderboard", "--challenge", "digits", "--phase", "dev")
    assert drawn.code == 0, drawn.stderr
    assert "Accuracy" in drawn.stdout
    unknown = cli.json(
        "leaderboard", "--challenge", "digits", "--phase", "dev", "--split", "nope", expect=1
    )
    assert unknown["code"] == "invalid_request"
    half = cli.run("leaderboard", "--challenge", "digits")
    assert half.code == 2

    # Not completed yet: the server refuses, after the short prefix resolved to the whole id.
    final = cli.json("final", "select", sent["submission_id"][:8], expect=1)
    assert final["code"] == "permission_denied"
