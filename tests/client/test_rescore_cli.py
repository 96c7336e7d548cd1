"""`yoyaku rescore` (the real console script against a live server): a host reads a phase's
rescore, follows it with --wait until the board switches, and a stranger is refused."""

from __future__ import annotations

import json

import pytest

from apps.benchmarks.models import Phase, Rescore
from tests.benchmarks.rescoring import new_scorer, rescore_all
from tests.benchmarks.scoring import apply_bundle, host_user
from tests.client.conftest import Cli, token_for
from tests.factories.users import make_user
from tests.grading.conftest import sandbox_settings  # noqa: F401 - the fixture


@pytest.mark.usefixtures("sandbox_settings")
def test_rescore_shows_progress_and_waits_for_the_switch(cli: Cli) -> None:
    host = host_user()
    apply_bundle(host)
    new_scorer(host)  # version 2: the baseline to score again
    rescore = Rescore.objects.get(phase__slug="dev", version=2)
    as_host = cli.as_user(token_for(host))

    shown = as_host.json("rescore", "--challenge", "digits", "--phase", "dev")
    assert shown == {
        "version": 2,
        "done": 0,
        "failed": 0,
        "total": 1,
        "state": "running",
        "scoring_version": 1,
    }
    text = as_host.run("rescore", "--challenge", "digits", "--phase", "dev")
    assert text.code == 0, text.stderr
    assert "version 2: running, 0 done, 0 failed of 1" in text.stderr

    waiting = as_host.popen(
        "rescore", "--challenge", "digits", "--phase", "dev", "--wait", "--interval", "0.2"
    )
    rescore_all(rescore.pk)
    _stdout, stderr = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, stderr
    assert "version 2: switched, 1 done, 0 failed of 1" in stderr
    assert Phase.objects.get(slug="dev").scoring_version == 2

    waited = as_host.json("rescore", "--challenge", "digits", "--phase", "dev", "--wait")
    assert (waited["state"], waited["done"], waited["scoring_version"]) == ("switched", 1, 2)

    stranger = cli.as_user(token_for(make_user(username="mallory")))
    refused = stranger.run("rescore", "--challenge", "digits", "--phase", "dev", "--json")
    assert refused.code != 0
    assert json.loads(refused.stdout)["code"] == "permission_denied"
