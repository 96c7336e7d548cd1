"""A graded phase submission through `yoyaku` (real bubblewrap sandboxes, the worker's own
task in a thread): `submit --wait` follows it to its scores, the phase's board ranks the team,
and `final select|unselect` take a short prefix of its id."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.benchmarks.bundles import EXAMPLE, grant_add_challenge
from tests.benchmarks.scoring import predictions_csv
from tests.client.conftest import Cli, token_for, write_files
from tests.factories.users import make_user


def _push(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "digits"
    shutil.copytree(EXAMPLE, folder)
    document: dict[str, Any] = yaml.safe_load((folder / "challenge.yaml").read_text())
    for phase in document["phases"]:
        phase["resources"] = {"timeout": 20, "memory_mb": 256}
    (folder / "challenge.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    host = cli.as_user(token_for(grant_add_challenge(make_user(username="hana"))))
    host.json("challenge", "push", str(folder))


def test_a_graded_submission_is_ranked_and_chosen_as_final(
    cli: Cli, tmp_path: Path, grading: Callable[[], None]
) -> None:
    _push(cli, tmp_path)
    answer = httpx.post(
        f"{cli.url}/api/challenges/digits/participate/",
        headers={"Authorization": f"Bearer {cli.token}"},
    )
    assert answer.status_code == 200, answer.text
    folder = write_files(tmp_path / "preds", {"predictions.csv": predictions_csv()})
    sent = cli.json(
        "submit",
        str(folder),
        "--challenge",
        "digits",
        "--phase",
        "dev",
        "--wait",
        "--timeout",
        "90",
    )
    assert sent["status"] == "completed", sent

    board = cli.json("leaderboard", "--challenge", "digits", "--phase", "dev")
    ours = [row for row in board["rows"] if not row["baseline"]]
    assert [row["submission_id"] for row in ours] == [sent["submission_id"]]
    assert ours[0]["rank"] == 1
    assert ours[0]["scores"]["accuracy"] == 1.0
    drawn = cli.run("leaderboard", "--challenge", "digits", "--phase", "dev")
    assert drawn.code == 0, drawn.stderr
    assert "researcher" in drawn.stdout
    assert "1.0000" in drawn.stdout

    chosen = cli.json("final", "select", sent["submission_id"][:6])
    assert chosen["final"] is True
    assert chosen["finals"] == [sent["submission_id"]]
    again = cli.json("final", "select", sent["submission_id"])
    assert again["finals"] == chosen["finals"]
    dropped = cli.json("final", "unselect", sent["submission_id"][:6])
    assert dropped["final"] is False
    assert dropped["finals"] == []
