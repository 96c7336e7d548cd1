"""The run's parts and their set-up; the load, the faults and the run build on it."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import boto3
import httpx

from bench.chaoslib.common import (
    BIN,
    BUCKET,
    CONCURRENT_LIMIT,
    GRADING_TIMEOUT,
    METRICS_TOKEN,
    PYTHON,
    WATCH_INTERVAL_MS,
    WEBHOOK_SECRET,
    free_port,
    log,
    wait_for,
)
from bench.chaoslib.deployment import Deployment
from bench.chaoslib.receivers import Receivers
from bench.chaoslib.servers import Servers
from bench.chaoslib.state import State
from bench.chaoslib.transport import RoundRobin
from yoyaku_client import Client
from yoyaku_client.transport import RetryPolicy

ACCOUNTS_SCRIPT = """
import json
from django.contrib.auth.models import Permission, User
from apps.core.services import token_create
tokens = {{}}
can_review = Permission.objects.get(codename="can_review")
for i in range({users}):
    user = User.objects.create_user(f"chaos-user-{{i}}")
    tokens[user.username] = token_create(user=user, name="chaos").token
for i in range(2):
    user = User.objects.create_user(f"chaos-reviewer-{{i}}")
    user.user_permissions.add(can_review)
    user = User.objects.get(pk=user.pk)
    tokens[user.username] = token_create(
        user=user, name="chaos", scopes=["read", "submit", "review"]
    ).token
print(json.dumps(tokens))
"""


class ChaosBase:
    """The run's parts and their set-up (the servers, S3, the receivers, the deployment)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
        self.rng = random.Random(self.seed)
        self.servers = Servers(
            os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/postgres",
            os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0",
        )
        self.run_dir = Path(tempfile.mkdtemp(prefix="yoyaku-chaos-"))
        self.state = State()
        self.web_ports: list[int] = []
        self.tokens: dict[str, str] = {}
        self.receiver_ports: dict[str, int] = {}
        self.receivers = Receivers()
        self.deployment: Deployment | None = None
        self.moto: subprocess.Popen[bytes] | None = None
        self.s3_endpoint = ""
        self.load_started = 0.0
        self.load_ended = 0.0

    # --- set-up ---------------------------------------------------------------------------

    def isolation_env(self) -> dict[str, str]:
        if shutil.which("bwrap"):
            log("grading isolation: bubblewrap")
            return {"GRADING_ALLOW_UNSANDBOXED": "false"}
        banner = "!" * 78
        print(
            f"{banner}\n!! bwrap is not installed: this run grades WITHOUT a sandbox "
            f"(GRADING_ALLOW_UNSANDBOXED=true)\n{banner}",
            flush=True,
        )
        return {"GRADING_ALLOW_UNSANDBOXED": "true"}

    def start_moto(self) -> None:
        port = free_port()
        out = (self.run_dir / "moto.log").open("ab")
        self.moto = subprocess.Popen(
            [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        self.s3_endpoint = f"http://127.0.0.1:{port}"
        if not wait_for(lambda: httpx.get(self.s3_endpoint, timeout=1).status_code < 500, 30):
            raise RuntimeError("moto's S3 server did not start")
        self.s3().create_bucket(Bucket=BUCKET)

    def s3(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.s3_endpoint,
            region_name="us-east-1",
            aws_access_key_id="chaos",
            aws_secret_access_key="chaos",  # noqa: S106 - moto accepts any key
        )

    def env(self) -> dict[str, str]:
        allowed = ",".join(f"127.0.0.1:{port}" for port in self.receiver_ports.values())
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("DJANGO_", "AWS_", "GRADING_", "Q_", "SCHEDULE_"))
        }
        env.update(
            {
                "DEBUG": "false",
                "SECRET_KEY": "chaos-" + hashlib.sha256(str(self.seed).encode()).hexdigest(),
                "ALLOWED_HOSTS": "127.0.0.1,localhost",
                "SESSION_COOKIE_SECURE": "false",
                "CSRF_COOKIE_SECURE": "false",
                "DATABASE_URL": self.servers.url_for(self.servers.run_db),
                "REDIS_URL": self.servers.redis_url,
                "AWS_STORAGE_BUCKET_NAME": BUCKET,
                "AWS_S3_ENDPOINT_URL": self.s3_endpoint,
                "AWS_S3_REGION_NAME": "us-east-1",
                "AWS_ACCESS_KEY_ID": "chaos",
                "AWS_SECRET_ACCESS_KEY": "chaos",
                "METRICS_TOKEN": METRICS_TOKEN,
                "PROMETHEUS_MULTIPROC_DIR": str(self.run_dir / "metrics"),
                "LOG_LEVEL": "WARNING",
                "LOG_REQUESTS": "false",
                "QUOTA_MAX_CONCURRENT_JOBS": str(CONCURRENT_LIMIT),
                "QUOTA_MAX_JOBS_PER_DAY": "100000",
                "GRADING_TIMEOUT": str(GRADING_TIMEOUT),
                "GRADING_MAX_ATTEMPTS": "10",
                "GRADING_SCORE_MAX": "100",
                "Q_WORKERS": "2",
                "Q_TIMEOUT": str(GRADING_TIMEOUT + 30),
                "Q_RETRY": str(GRADING_TIMEOUT + 60),
                "BOOKING_PLAN_WATCH_INTERVAL": str(WATCH_INTERVAL_MS),
                "EXECUTION_GUARD_TIME": "5",
                "MINIMUM_LIFE_TERM": "0.25",
                "DEATH_RETRY_INTERVAL": "0.1",
                "SCHEDULE_WEBHOOK_SECRET": WEBHOOK_SECRET,
                # SSRF hardening refuses loopback targets unless the allow-list names them.
                "SCHEDULE_WEBHOOK_ALLOWED_HOSTS": allowed,
                "SCHEDULE_WEBHOOK_BASE_URL": f"http://127.0.0.1:{self.web_ports[0]}",
                **self.isolation_env(),
            }
        )
        return env

    def setup(self) -> None:
        args = self.args
        log(f"seed {self.seed}; logs in {self.run_dir}")
        (self.run_dir / "metrics").mkdir()
        self.servers.create_db()
        self.servers.redis_clear()
        log(f"database {self.servers.run_db} on {self.servers.pg[0]}:{self.servers.pg[1]}")
        self.start_moto()
        self.receiver_ports = self.receivers.start()
        self.web_ports = [free_port() for _ in range(args.web)]
        deployment = Deployment(self.servers, self.run_dir, self.env())
        self.deployment = deployment
        deployment.manage("migrate", "--noinput")
        deployment.manage("bootstrap", "--no-accounts")
        output = deployment.manage("shell", "-c", ACCOUNTS_SCRIPT.format(users=args.users))
        self.tokens = json.loads(output.strip().splitlines()[-1])
        for index, port in enumerate(self.web_ports):
            deployment.add(
                f"web{index}",
                "web",
                [
                    str(BIN / "gunicorn"),
                    "config.wsgi",
                    "-c",
                    "config/gunicorn.py",
                    "--bind",
                    f"127.0.0.1:{port}",
                    "--workers",
                    "2",
                    "--timeout",
                    "60",
                ],
                port=port,
            )
        for index in range(args.workers):
            deployment.add(f"worker{index}", "worker", [PYTHON, "manage.py", "qcluster"])
        for index in range(args.watchers):
            deployment.add(f"watcher{index}", "watcher", [PYTHON, "manage.py", "run_plan_watcher"])
        for name in deployment.procs:
            deployment.start(name)
        for port in self.web_ports:
            if not wait_for(lambda p=port: self.healthy(p), 60):  # type: ignore[misc]
                raise RuntimeError(f"web on port {port} did not start")
        log(
            f"deployment up: web {self.web_ports}, {args.workers} clusters, "
            f"{args.watchers} watchers, S3 {self.s3_endpoint}, receivers {self.receiver_ports}"
        )

    def healthy(self, port: int) -> bool:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200

    def client(self, who: str) -> Client:
        return Client(
            f"http://127.0.0.1:{self.web_ports[0]}",
            token=self.tokens[who],
            retry=RetryPolicy(max_attempts=8, base_delay=0.3, max_delay=3.0),
            timeout=30.0,
            http_transport=RoundRobin(self.web_ports, self.state.answers, self.state.lock),
        )
