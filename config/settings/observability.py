"""Logging, metrics and the web pages' timings."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from config.settings.base import BASE_DIR
from config.settings.environment import env, env_number

# --- Logging ----------------------------------------------------------------------------------
# `plain` (default, for `make run`) or `json`: one JSON object per line (python-json-logger)
# with time, level, logger, message, request_id, user_id and the job / submission / life /
# plan ids the line is about (apps/core/logcontext.py puts them on every record).
LOG_FORMAT = env.str("LOG_FORMAT", default="plain")
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be plain or json, got {LOG_FORMAT!r}")
# One access line per request (logger `yoyaku.request`) with its status and duration.
LOG_REQUESTS = env.bool("LOG_REQUESTS", default=True)
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "context": {"()": "apps.core.logcontext.ContextFilter"},
        "one_line_warning": {"()": "apps.core.logfilters.OneLineWarning"},
    },
    "formatters": {
        # One line per record: control characters from requests are written escaped.
        "plain": {
            "class": "apps.core.logcontext.PlainFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s%(context)s: %(message)s",
        },
        "json": {"()": "apps.core.logcontext.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        # Django's own handlers (a plain console copy with DEBUG on; mail to ADMINS, which is
        # empty) are dropped: its lines reach the one handler of the root logger.
        "django": {"handlers": [], "propagate": True},
        "django.db.backends": {"level": "INFO"},
        # A `Host` not in ALLOWED_HOSTS (400): one WARNING line, not an ERROR with a traceback.
        "django.security.DisallowedHost": {"filters": ["one_line_warning"]},
        # runserver's own lines go through the one handler (JSON with LOG_FORMAT=json). A
        # request's access line is yoyaku.request's, so runserver's is kept only for warnings
        # and errors, unless LOG_REQUESTS is off.
        "django.server": {
            "handlers": ["console"],
            "level": "WARNING" if LOG_REQUESTS else "INFO",
            "propagate": False,
        },
    },
}

# --- Metrics (SPEC §10) -----------------------------------------------------------------------
# GET /metrics (Prometheus text format) needs `Authorization: Bearer <METRICS_TOKEN>`; without a
# token it is open only with DEBUG on. METRICS_ENABLED=false turns every metric into a no-op
# and /metrics into a 404 (the benchmark's "metrics off").
METRICS_ENABLED = env.bool("METRICS_ENABLED", default=True)
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
# prometheus-client's multiprocess mode: every process (gunicorn workers, qcluster workers,
# watchers) writes its samples to files in this folder and /metrics sums them. prometheus-client
# reads the variable itself, before the first metric exists, so the default is put in the
# environment here (inherited by child processes). Wipe it with `manage.py metrics_clean`
# before the processes of a host start (docs/observability.md).
PROMETHEUS_MULTIPROC_DIR = env.str(
    "PROMETHEUS_MULTIPROC_DIR",
    default=str(
        Path(tempfile.gettempdir())
        / f"yoyaku-metrics-{hashlib.sha256(str(BASE_DIR).encode()).hexdigest()[:12]}"
    ),
)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = PROMETHEUS_MULTIPROC_DIR
Path(PROMETHEUS_MULTIPROC_DIR).mkdir(parents=True, exist_ok=True)

# --- Web pages --------------------------------------------------------------------------------
PAGES_RETRY_BASE_DELAY_MS = int(env_number("PAGES_RETRY_BASE_DELAY_MS", 500))
PAGES_POLL_INTERVAL_MS = int(env_number("PAGES_POLL_INTERVAL_MS", 2000))
# Files over this many bytes (or over MAX_UPLOAD_FILE_SIZE, if lower) go from the pages as
# resumable uploads, in slices of PAGES_UPLOAD_SLICE_BYTES; smaller ones in one request.
PAGES_RESUMABLE_OVER_BYTES = int(env_number("PAGES_RESUMABLE_OVER_BYTES", 16 * 1024 * 1024))
PAGES_UPLOAD_SLICE_BYTES = int(env_number("PAGES_UPLOAD_SLICE_BYTES", 8 * 1024 * 1024))
