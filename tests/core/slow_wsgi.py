"""The project's WSGI application with one more path for the web-server tests: `/slow?seconds=N`
holds the worker's thread N seconds (at most 30), then answers 200."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from config.wsgi import application as project_application


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if environ["PATH_INFO"] != "/slow":
        return project_application(environ, start_response)
    seconds = float(parse_qs(environ["QUERY_STRING"]).get("seconds", ["1"])[0])
    time.sleep(min(max(seconds, 0.0), 30.0))
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "4")])
    return [b"slow"]
