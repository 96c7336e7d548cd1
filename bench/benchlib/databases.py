"""Throw-away databases for the benchmarks. The quick mode migrates one template of each kind
first (bench/run_all.py), so a script's own `migrate` finds nothing to do."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path
from urllib.parse import urlparse

# Set by bench/run_all.py --quick: a migrated PostgreSQL database and SQLite file to copy.
PG_TEMPLATE = "BENCH_PG_TEMPLATE"
SQLITE_TEMPLATE = "BENCH_SQLITE_TEMPLATE"


def psql_admin(url: str, sql: str) -> None:
    """Run `sql` on the maintenance database `postgres` of the server `url` names."""
    parsed = urlparse(url)
    subprocess.run(
        [
            *("psql", "-q", "-h", parsed.hostname or "127.0.0.1", "-p", str(parsed.port or 5432)),
            *("-U", parsed.username or "postgres", "-d", "postgres", "-c", sql),
        ],
        check=True,
        capture_output=True,
    )


def postgres_recreate(url: str) -> None:
    """Drop and create the database `url` names (a copy of the quick mode's template, when
    there is one)."""
    name = urlparse(url).path.lstrip("/")
    psql_admin(url, f'DROP DATABASE IF EXISTS "{name}"')
    template = os.environ.get(PG_TEMPLATE, "")
    suffix = f' TEMPLATE "{template}"' if template else ""
    psql_admin(url, f'CREATE DATABASE "{name}"{suffix}')


def postgres_drop(url: str) -> None:
    psql_admin(url, f'DROP DATABASE IF EXISTS "{urlparse(url).path.lstrip("/")}"')


def sqlite_url(path: Path) -> str:
    """A SQLite database at `path` (a copy of the quick mode's template, when there is one)."""
    template = os.environ.get(SQLITE_TEMPLATE, "")
    if template and not path.exists():
        shutil.copyfile(template, path)
    return f"sqlite:///{path}"


def redis_reachable(url: str) -> bool:
    """Whether something accepts connections at the host and port of the Redis `url`."""
    if not url:
        return False
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 6379), 1):
            return True
    except OSError:
        return False
