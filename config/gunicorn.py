"""gunicorn settings of the `web` process (Procfile): `gunicorn -c config/gunicorn.py`.

Only what the metrics need; the command line sets bind, workers and logs.
"""

from __future__ import annotations

import os
from typing import Any


def on_starting(server: Any) -> None:
    """Read the settings once in the master, so that PROMETHEUS_MULTIPROC_DIR (the settings'
    default when unset) is in the environment the workers inherit and `child_exit` uses."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.conf import settings

    settings.PROMETHEUS_MULTIPROC_DIR  # noqa: B018 - loading the settings sets the variable


def child_exit(server: Any, worker: Any) -> None:
    """A worker ended: prometheus-client drops its live gauges' files (its counters and
    histograms stay in the totals)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


# With LOG_FORMAT=json gunicorn's own lines (start, worker exits, errors) are JSON objects too,
# through the formatter the Django processes use.
if os.environ.get("LOG_FORMAT") == "json":
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "apps.core.logcontext.JsonFormatter"}},
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stderr",
            }
        },
        "loggers": {
            "gunicorn.error": {"handlers": ["console"], "level": "INFO", "propagate": False},
            "gunicorn.access": {"handlers": ["console"], "level": "INFO", "propagate": False},
        },
        "root": {"handlers": ["console"], "level": "INFO"},
    }
