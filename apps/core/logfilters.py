"""Filters of the LOGGING setting (config/settings/observability.py)."""

from __future__ import annotations

import logging


class OneLineWarning(logging.Filter):
    """Writes a record as one WARNING line: an ERROR lowered, its traceback dropped.

    On `django.security.DisallowedHost`: a request naming a host not in ALLOWED_HOSTS is a
    client's mistake or a scan, answered 400; the server's stack says nothing about it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.WARNING:
            record.levelno = logging.WARNING
            record.levelname = logging.getLevelName(logging.WARNING)
        record.exc_info = None
        record.exc_text = None
        return True
