"""A submission whose result a person must confirm.

It writes `needs_review: true` into metrics.json: the job completes, and the submission waits
in the review queue (`yoyaku review queue`) until a reviewer approves or rejects it.
"""

import json
import sys


def main() -> None:
    config_file = sys.argv[1] if len(sys.argv) > 1 else "config.yaml"
    with open(config_file, encoding="utf-8") as handle:
        lines = [line.strip() for line in handle if line.strip()]
    print(f"read {len(lines)} configuration lines; asking for a human review")
    with open("metrics.json", "w", encoding="utf-8") as handle:
        json.dump({"score": 0.5, "needs_review": True, "reason": "free-text answer"}, handle)


if __name__ == "__main__":
    main()
