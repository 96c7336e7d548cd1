"""Scale-out under faults: a real multi-process deployment, killed while it works.

`python bench/chaos.py --minutes N --web 2 --workers 2 --watchers 2 --seed S` (`make chaos`)
starts, on this machine:
  - gunicorn web processes (config/gunicorn.py, 2 workers each) on their own loopback
    ports; every client spreads its requests round-robin over them;
  - `manage.py qcluster` clusters (Redis broker) and `manage.py run_plan_watcher` watchers;
  - a PostgreSQL database created for the run on the server of DATABASE_URL (dropped after),
    Redis from REDIS_URL, moto's S3 server on loopback for files, and webhook receivers on
    loopback that verify every Standard Webhooks signature and record every delivery (one
    answers 503 to each webhook's first attempt, one always fails).
The load, through the SDK (`yoyaku_client`), for the whole run: plain users upload multi-file
submissions and submit jobs with idempotency keys (racing on a concurrent limit of 2 and, some
of the time, two requests on one key); reviewers claim and approve what the grader sent to
review; point and term Lives fire during the run. A sampler reads every user's usage from the
database twice a second.

A fault injector on the printed seed SIGKILLs a web, worker (while it grades) or watcher
process and restarts it, SIGSTOPs a watcher for longer than its lease, restarts Redis, and
restarts PostgreSQL once (`pg_ctlcluster ... restart -m fast`). Only the servers named by
DATABASE_URL / REDIS_URL are restarted. After a drain window (and the `orphan_files` cleanup,
its grace set to 0) the invariants are checked from the database, the bucket and the receivers'
log, printed as a table with figures; the exit
status is 1 when any invariant is broken.

Defaults: DATABASE_URL postgres://postgres@127.0.0.1:5432/postgres, REDIS_URL
redis://127.0.0.1:6379/0. `--ci`: one fault of each kind, evenly spread.

The parts are in bench/chaoslib/ (its package docstring names each module).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "client"))
sys.path.insert(0, str(ROOT))

from bench.chaoslib.common import log  # noqa: E402
from bench.chaoslib.run import Chaos  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("CHAOS_MINUTES", 10)))
    parser.add_argument("--web", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--watchers", type=int, default=2)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--drain", type=float, default=240.0, help="seconds to wait at the end")
    parser.add_argument("--ci", action="store_true", help="one fault of each kind")
    parser.add_argument(
        "--keep-on-failure", action="store_true", help="keep the database when a check fails"
    )
    args = parser.parse_args(argv)
    chaos = Chaos(args)
    interrupted: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        interrupted.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    status = 1
    try:
        status = chaos.run()
        return status
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        chaos.cleanup(keep_db=bool(status) and args.keep_on_failure)


if __name__ == "__main__":
    sys.exit(main())
