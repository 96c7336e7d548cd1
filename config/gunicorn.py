"""gunicorn settings of the `web` process (Procfile): `gunicorn -c config/gunicorn.py`.

The request-head limits and the error body, and what the metrics need; the command line sets
bind, workers and logs.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from gunicorn import util

from config.server.errors import error_response

# Request heads and bodies are read by an event loop; a complete request runs the Django WSGI
# application in one of the worker's `threads` (config/server). A client sending its head or
# body slowly holds no thread; a head must be complete within REQUEST_HEADER_TIMEOUT.
worker_class = "config.server.worker.Worker"
threads = 1
# Django serves no ASGI lifespan events.
asgi_lifespan = "off"

# The app refuses a URL over MAX_URL_LENGTH (4096), more than MAX_REQUEST_HEADERS (100) header
# lines or one over MAX_REQUEST_HEADER_SIZE (8190) with its own JSON 414 / 431. gunicorn's
# limits sit above those so that the app answers first: the request line at gunicorn's maximum
# (8190 bytes), twice the header lines and twice the line size.
limit_request_line = 8190
limit_request_fields = 200
limit_request_field_size = 16380


def write_json_error(sock: socket.socket, status_int: int, reason: str, mesg: str) -> None:
    """What gunicorn's sync and thread workers answer themselves (`-k sync`, as the benchmarks
    run the previous setup), in the API's one error body instead of gunicorn's HTML page. The
    default worker answers the same way (config/server/protocol.py)."""
    util.write_nonblock(sock, error_response(status_int, reason, mesg))


# Workers are forked from the master that read this file: they write errors this way too.
util.write_error = write_json_error


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


# gunicorn's own lines (start, worker exits, errors that quote a request) go through the
# formatters the Django processes use: JSON objects with LOG_FORMAT=json, else one escaped
# plain line per record (a request line with CR, LF or ESC cannot forge or colour a line).
_PLAIN = {
    "()": "apps.core.logcontext.PlainFormatter",
    "fmt": "%(asctime)s [%(process)d] [%(levelname)s] %(message)s",
    "datefmt": "[%Y-%m-%d %H:%M:%S %z]",
}
_FORMATTER = "json" if os.environ.get("LOG_FORMAT") == "json" else "plain"
logconfig_dict = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "apps.core.logcontext.JsonFormatter"}, "plain": _PLAIN},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": _FORMATTER,
            "stream": "ext://sys.stderr",
        }
    },
    "loggers": {
        "gunicorn.error": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "gunicorn.access": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
    "root": {"handlers": ["console"], "level": "INFO"},
}
