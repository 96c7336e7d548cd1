"""Helpers for the rescore tests: a challenge whose submissions were graded in version 1,
then a bundle with a new scorer (version 2) that halves every accuracy, so that each score
tells which version it comes from."""

from __future__ import annotations

from django.contrib.auth.models import User

from apps.benchmarks.models import Challenge, Entry, Score
from apps.benchmarks.services.rescoring import rescore_next
from tests.benchmarks.bundles import EXAMPLE
from tests.benchmarks.scoring import apply_bundle, scorer_replaced

# Version 2: the example's scorer, then every accuracy halved (after `sleep` seconds).
HALVING_SCORER = """
import json, runpy, subprocess
if {sleep!r}:
    subprocess.run(["/bin/sleep", {sleep!r}], check=True)
try:
    runpy.run_path("score_example.py", run_name="__main__")
except SystemExit:
    pass
with open("/scores/scores.json") as handle:
    scores = json.load(handle)
if "invalid" not in scores:
    for values in scores.values():
        values["accuracy"] = values["accuracy"] / 2
with open("/scores/scores.json", "w") as handle:
    json.dump(scores, handle)
"""

CRASHING_SCORER = """
raise SystemExit(3)
"""


def new_scorer(host: User, *, sleep: str = "", body: str | None = None) -> Challenge:
    """Apply the example bundle again with the halving scorer (or `body`): version 2."""
    scorer = HALVING_SCORER.format(sleep=sleep) if body is None else body
    return apply_bundle(
        host,
        extra={
            **scorer_replaced(scorer),
            "scoring/score_example.py": (EXAMPLE / "scoring/score.py").read_bytes(),
        },
    )


def rescore_all(rescore_id: int, *, limit: int = 100) -> list[str]:
    """Run the rescore's work in this process until nothing is left to take (or, `enough`,
    RESCORE_WORKERS other chains hold live leases: this chain ends, as a task would)."""
    outcomes: list[str] = []
    for _ in range(limit):
        outcome = rescore_next(rescore_id=rescore_id)
        outcomes.append(outcome)
        if outcome in ("idle", "enough"):
            return outcomes
    raise AssertionError("the rescore did not finish")


def scores_by_version(entry: Entry) -> dict[int, dict[str, dict[str, float]]]:
    found: dict[int, dict[str, dict[str, float]]] = {}
    for score in Score.objects.filter(entry=entry):
        found.setdefault(score.version, {})[score.split] = score.values
    return found
