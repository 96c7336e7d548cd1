"""Scoring program of the digits benchmark.

Reads the participant's predictions at /predictions/predictions.csv and the reference labels
at /reference/labels.csv; writes /scores/scores.json with `accuracy` and `errors` per split,
or `{"invalid": "..."}` when the predictions cannot be judged.
"""

import csv
import json
import sys
from pathlib import Path

PREDICTIONS = Path("/predictions")
REFERENCE = Path("/reference")
SCORES = Path("/scores/scores.json")


def read_predictions(folder: Path) -> dict[str, str] | str:
    found = sorted(folder.rglob("predictions.csv"))
    if not found:
        return "no predictions.csv found"
    with found[0].open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows or "id" not in rows[0] or "label" not in rows[0]:
        return "predictions.csv needs the columns id,label"
    return {row["id"]: row["label"].strip() for row in rows}


def main() -> int:
    predicted = read_predictions(PREDICTIONS)
    if isinstance(predicted, str):
        SCORES.write_text(json.dumps({"invalid": predicted}))
        return 0
    with (REFERENCE / "labels.csv").open(newline="") as handle:
        reference = list(csv.DictReader(handle))
    scores: dict[str, dict[str, float]] = {}
    for split in ("public", "private"):
        rows = [row for row in reference if row["split"] == split]
        wrong = sum(1 for row in rows if predicted.get(row["id"]) != row["label"])
        scores[split] = {
            "accuracy": (len(rows) - wrong) / len(rows) if rows else 0.0,
            "errors": float(wrong),
        }
    SCORES.write_text(json.dumps(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
