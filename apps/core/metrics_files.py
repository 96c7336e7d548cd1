"""The multiprocess metrics folder: how it is cleaned.

prometheus-client's multiprocess mode keeps one file per process and metric type
(`counter_<pid>.db`, `histogram_<pid>.db`) in PROMETHEUS_MULTIPROC_DIR. The files of a
process that ended stay, so its counts still add to the totals (counters never go down while
the host runs); the folder is emptied when the host's processes are all (re)started
(`manage.py metrics_clean`), which Prometheus sees as a counter reset, as after any restart.
gunicorn's `child_exit` hook (config/gunicorn.py) marks a dead worker with `mark_process_dead`.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings


def metrics_dir() -> Path:
    return Path(settings.PROMETHEUS_MULTIPROC_DIR)


def metrics_dir_clean(*, dry_run: bool = False) -> tuple[Path, list[str]]:
    """Delete the folder's `*.db` files (created anew by the next process); returns them."""
    folder = metrics_dir()
    folder.mkdir(parents=True, exist_ok=True)
    names = sorted(path.name for path in folder.glob("*.db"))
    if not dry_run:
        for name in names:
            (folder / name).unlink(missing_ok=True)
    return folder, names
