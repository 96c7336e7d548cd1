"""The servers the run was pointed at."""

from __future__ import annotations

import contextlib
import os
import subprocess
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import redis

from bench.chaoslib.common import wait_for


@dataclass
class Servers:
    """PostgreSQL and Redis from the environment, and how to restart exactly those."""

    database_url: str
    redis_url: str
    run_db: str = ""

    @property
    def pg(self) -> tuple[str, int, str]:
        parts = urlsplit(self.database_url)
        return parts.hostname or "127.0.0.1", parts.port or 5432, parts.username or "postgres"

    def url_for(self, name: str) -> str:
        parts = urlsplit(self.database_url)
        return urlunsplit((parts.scheme, parts.netloc, "/" + name, "", ""))

    def admin(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.url_for("postgres"), autocommit=True, connect_timeout=3)

    def run_conn(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.url_for(self.run_db), autocommit=True, connect_timeout=3)

    def create_db(self) -> None:
        self.run_db = f"yoyaku_chaos_{os.getpid()}"
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.run_db}"')
            conn.execute(f'CREATE DATABASE "{self.run_db}"')

    def drop_db(self) -> None:
        if not self.run_db:
            return
        with contextlib.suppress(Exception), self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.run_db}" WITH (FORCE)')

    def pg_ready(self) -> bool:
        try:
            with self.admin() as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def pg_restart(self) -> None:
        """Restart the cluster listening on the URL's port (Debian's pg_ctlcluster)."""
        port = self.pg[1]
        listing = subprocess.run(
            ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True
        ).stdout
        for line in listing.splitlines():
            fields = line.split()
            if len(fields) >= 3 and fields[2] == str(port):
                subprocess.run(
                    [
                        "pg_ctlcluster",
                        "--skip-systemctl-redirect",
                        fields[0],
                        fields[1],
                        "restart",
                        "-m",
                        "fast",
                    ],
                    check=True,
                    capture_output=True,
                )
                return
        raise RuntimeError(f"no PostgreSQL cluster on port {port} (pg_lsclusters)")

    @property
    def redis_addr(self) -> tuple[str, int, int]:
        parts = urlsplit(self.redis_url)
        db = int((parts.path or "/0").lstrip("/") or 0)
        return parts.hostname or "127.0.0.1", parts.port or 6379, db

    def redis(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis_url, socket_timeout=3, socket_connect_timeout=3)

    def redis_ready(self) -> bool:
        try:
            return bool(self.redis().ping())
        except redis.RedisError:
            return False

    def redis_restart(self) -> None:
        host, port, _ = self.redis_addr
        with contextlib.suppress(redis.RedisError):
            self.redis().shutdown(nosave=True)
        wait_for(lambda: not self.redis_ready(), 10)
        subprocess.run(
            [
                "redis-server",
                "--daemonize",
                "yes",
                "--bind",
                host,
                "--port",
                str(port),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            check=True,
            capture_output=True,
        )
        if not wait_for(self.redis_ready, 20):
            raise RuntimeError("Redis did not come back")

    def redis_clear(self) -> None:
        with contextlib.suppress(redis.RedisError):
            client = self.redis()
            for key in client.scan_iter("django_q:*"):
                client.delete(key)
