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
"""

from __future__ import annotations

import argparse
import base64
import collections
import contextlib
import datetime as dt
import hashlib
import hmac
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import boto3
import httpx
import psycopg
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "client"))

from yoyaku_client import Client  # noqa: E402
from yoyaku_client.client import Action  # noqa: E402
from yoyaku_client.errors import ApiError, QuotaError, YoyakuError  # noqa: E402
from yoyaku_client.transport import RetryPolicy  # noqa: E402

PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv").exists() else sys.executable
BIN = Path(PYTHON).parent
WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"yoyaku-chaos-webhook-secret-0123").decode()
METRICS_TOKEN = "chaos-metrics"  # noqa: S105 - a throwaway deployment's token
CONCURRENT_LIMIT = 2
GRADING_TIMEOUT = 30
WATCH_INTERVAL_MS = 1000  # the watchers' lease is five intervals
WATCHER_LEASE = 5 * WATCH_INTERVAL_MS / 1000
BUCKET = "yoyaku-chaos"
FAULT_KINDS = ("web_kill", "worker_kill", "watcher_kill", "watcher_stop", "redis_restart")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], bool], timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except Exception:  # noqa: S110 - the thing waited for is not up yet
            pass
        time.sleep(interval)
    return False


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


# --- the servers the run was pointed at ------------------------------------------------------


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


# --- webhook receivers -----------------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    receiver: str
    webhook_id: str
    life_uuid: str
    plan: str
    at: float
    status: int
    signature_ok: bool


class Receivers:
    """Three loopback receivers: `ok` answers 200; `flaky` answers 503 to the first attempt of
    every webhook-id, then 200; `down` always answers 500."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self.lock = threading.Lock()
        self.seen: set[str] = set()
        self.servers: dict[str, ThreadingHTTPServer] = {}
        self.secret = base64.b64decode(WEBHOOK_SECRET.removeprefix("whsec_"))

    def verify(self, headers: Any, body: bytes) -> bool:
        msg_id = headers.get("webhook-id", "")
        stamp = headers.get("webhook-timestamp", "")
        given = headers.get("webhook-signature", "")
        if not (msg_id and stamp and given):
            return False
        signed = f"{msg_id}.{stamp}.".encode() + body
        expected = base64.b64encode(hmac.new(self.secret, signed, hashlib.sha256).digest())
        fresh = abs(time.time() - int(stamp)) < 300
        return fresh and any(
            hmac.compare_digest(part.partition(",")[2].encode(), expected)
            for part in given.split()
            if part.startswith("v1,")
        )

    def start(self) -> dict[str, int]:
        ports: dict[str, int] = {}
        for name in ("ok", "flaky", "down"):
            server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler(name))
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.servers[name] = server
            ports[name] = int(server.server_address[1])
        return ports

    def stop(self) -> None:
        for server in self.servers.values():
            server.shutdown()

    def _handler(self, name: str) -> type[BaseHTTPRequestHandler]:
        receivers = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                msg_id = self.headers.get("webhook-id", "")
                with receivers.lock:
                    if name == "ok":
                        status = 200
                    elif name == "flaky":
                        status = 200 if msg_id in receivers.seen else 503
                        receivers.seen.add(msg_id)
                    else:
                        status = 500
                    receivers.deliveries.append(
                        Delivery(
                            receiver=name,
                            webhook_id=msg_id,
                            life_uuid=self.headers.get("X-Schedule-Life-UUID", ""),
                            plan=self.headers.get("X-Schedule-Plan", ""),
                            at=time.time(),
                            status=status,
                            signature_ok=receivers.verify(self.headers, body),
                        )
                    )
                payload = b'{"ok": true}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler


# --- the deployment --------------------------------------------------------------------------


@dataclass
class Proc:
    name: str
    kind: str
    argv: list[str]
    port: int = 0
    popen: subprocess.Popen[bytes] | None = None
    starts: int = 0


class Deployment:
    def __init__(self, servers: Servers, run_dir: Path, env: dict[str, str]) -> None:
        self.servers = servers
        self.run_dir = run_dir
        self.env = env
        self.procs: dict[str, Proc] = {}
        self.lock = threading.Lock()

    def manage(self, *args: str, timeout: float = 300) -> str:
        done = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
        return done.stdout

    def add(self, name: str, kind: str, argv: list[str], port: int = 0) -> None:
        self.procs[name] = Proc(name=name, kind=kind, argv=argv, port=port)

    def start(self, name: str) -> None:
        proc = self.procs[name]
        out = (self.run_dir / f"{name}.log").open("ab")
        proc.popen = subprocess.Popen(
            proc.argv,
            cwd=ROOT,
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        proc.starts += 1

    def signal(self, name: str, signum: int) -> None:
        proc = self.procs[name]
        if proc.popen is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.popen.pid, signum)

    def kill(self, name: str) -> None:
        """SIGKILL the process and everything it started (its session's group)."""
        proc = self.procs[name]
        self.signal(name, signal.SIGKILL)
        if proc.popen is not None:
            proc.popen.wait()

    def of_kind(self, kind: str) -> list[str]:
        return [name for name, proc in self.procs.items() if proc.kind == kind]

    def group_of(self, pid: int) -> str | None:
        try:
            pgid = os.getpgid(pid)
        except ProcessLookupError:
            return None
        for name, proc in self.procs.items():
            if proc.popen is not None and proc.popen.pid == pgid:
                return name
        return None

    def stop_all(self) -> None:
        for name in self.procs:
            self.signal(name, signal.SIGCONT)
            self.signal(name, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for name, proc in self.procs.items():
            if proc.popen is None:
                continue
            try:
                proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill(name)
            self.signal(name, signal.SIGKILL)  # what the group's leader left behind


# --- HTTP: round-robin over the web processes, every answer recorded -------------------------


@dataclass(frozen=True)
class Answer:
    at: float
    status: int  # 0: no answer (refused, reset, timeout)
    json_error_body: bool
    path: str


class RoundRobin(httpx.BaseTransport):
    """Sends each request to the next web port and records its status; 5xx bodies are read
    to check they are the SPEC's JSON error body."""

    counter = 0
    counter_lock = threading.Lock()

    def __init__(self, ports: list[int], answers: list[Answer], lock: threading.Lock) -> None:
        self.ports = ports
        self.answers = answers
        self.lock = lock
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        with RoundRobin.counter_lock:
            RoundRobin.counter += 1
            port = self.ports[RoundRobin.counter % len(self.ports)]
        request.url = request.url.copy_with(port=port)
        started = time.time()
        try:
            response = self.inner.handle_request(request)
        except httpx.TransportError:
            with self.lock:
                self.answers.append(Answer(started, 0, False, request.url.path))
            raise
        json_body = False
        if response.status_code >= 500:
            response.read()
            try:
                body = json.loads(response.content)
                json_body = (
                    response.headers.get("content-type", "").startswith("application/json")
                    and body.get("success") is False
                    and isinstance(body.get("code"), str)
                    and isinstance(body.get("error"), str)
                )
            except (ValueError, AttributeError):
                json_body = False
        with self.lock:
            self.answers.append(Answer(started, response.status_code, json_body, request.url.path))
        return response

    def close(self) -> None:
        self.inner.close()


# --- the run ---------------------------------------------------------------------------------


@dataclass
class Fault:
    kind: str
    at: float
    target: str = ""
    recovered_at: float | None = None
    detail: str = ""
    plans: list[int] = field(default_factory=list)  # a watcher's armed plans


@dataclass
class State:
    stop_load: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    answers: list[Answer] = field(default_factory=list)
    created_jobs: set[str] = field(default_factory=set)
    accepted_jobs: set[str] = field(default_factory=set)
    key_jobs: dict[tuple[str, str], set[str]] = field(
        default_factory=lambda: collections.defaultdict(set)
    )
    lives: dict[str, str] = field(default_factory=dict)  # life_uuid -> receiver scenario
    samples: int = 0
    over_limit: list[str] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    pg_window: tuple[float, float] | None = None
    load_errors: collections.Counter[str] = field(default_factory=collections.Counter)
    reviews_done: int = 0
    orphans_swept: str = ""


PROGRAM = """import json, sys, time
time.sleep({sleep})
print("graded", {score})
with open("metrics.json", "w") as handle:
    json.dump({{"score": {score}}}, handle)
"""


class Chaos:
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

    # --- load -----------------------------------------------------------------------------

    def user_loop(self, user: str, index: int) -> None:
        rng = random.Random(f"{self.seed}-{user}-{index}")
        folder = self.run_dir / f"files-{user}-{index}"
        folder.mkdir()
        number = 0
        with self.client(user) as client:
            while not self.state.stop_load.is_set():
                number += 1
                score = 150 if rng.random() < 0.15 else rng.randint(1, 99)
                (folder / "main.py").write_text(
                    PROGRAM.format(sleep=round(rng.uniform(2.0, 5.0), 1), score=score)
                )
                (folder / "config.yaml").write_text(f"name: {user}-{index}-{number}\n")
                (folder / "helper.py").write_text(
                    f"VALUE = {number}\n" + "#" * rng.randint(0, 4000)
                )
                try:
                    submission = client.create_submission(
                        [folder / "main.py", folder / "config.yaml"]
                    )
                    client.upload_file(submission.submission_id, folder / "helper.py")
                except YoyakuError as exc:
                    self.count_error("upload", exc)
                    time.sleep(0.5)
                    continue
                key = f"{user}-{index}-{number}"
                shared = rng.random() < 0.3
                self.submit_until_answered(client, user, key, submission.submission_id, shared)

    def submit_until_answered(
        self, client: Client, user: str, key: str, submission_id: str, shared: bool
    ) -> None:
        """Submit with one key until the server names a job; on a quota refusal wait for a slot
        (the same key again). After the load stopped, a refused submission is given up (its
        draft stays a draft), but a request that may have created a job is never abandoned."""
        while True:
            results: list[str] = []
            errors: list[BaseException] = []

            def one(
                target: Client,
                results: list[str] = results,
                errors: list[BaseException] = errors,
            ) -> None:
                try:
                    answer = target.submit_job(submission_id, idempotency_key=key)
                    results.append(answer.job_id)
                    if not answer.idempotent_hit:
                        with self.state.lock:
                            self.state.created_jobs.add(answer.job_id)
                except BaseException as failure:
                    errors.append(failure)

            if shared:
                with self.client(user) as twin:
                    racer = threading.Thread(target=one, args=(twin,))
                    racer.start()
                    one(client)
                    racer.join()
            else:
                one(client)
            with self.state.lock:
                self.state.key_jobs[(user, key)].update(results)
                self.state.accepted_jobs.update(results)
            if results:
                return
            quota = all(isinstance(exc, QuotaError) for exc in errors)
            for exc in errors:
                self.count_error("submit", exc)
            if quota and self.state.stop_load.is_set():
                return
            time.sleep(0.5 if quota else 1.0)

    def count_error(self, where: str, exc: BaseException) -> None:
        code = exc.code if isinstance(exc, ApiError) else type(exc).__name__
        with self.state.lock:
            self.state.load_errors[f"{where}:{code}"] += 1

    def reviewer_loop(self, reviewer: str) -> None:
        rng = random.Random(f"{self.seed}-{reviewer}")
        with self.client(reviewer) as client:
            while not self.state.stop_load.is_set():
                try:
                    queue = client.review_queue(limit=10)
                except YoyakuError as exc:
                    self.count_error("review", exc)
                    time.sleep(1)
                    continue
                for entry in queue:
                    if entry.claimed_by is not None:
                        continue
                    try:
                        client.claim_review(entry.submission_id)
                        time.sleep(rng.uniform(0.1, 0.5))
                        client.complete_review(entry.submission_id, verdict="approve", score=50)
                        with self.state.lock:
                            self.state.reviews_done += 1
                    except YoyakuError as exc:
                        self.count_error("review", exc)
                time.sleep(rng.uniform(0.5, 1.5))

    def booking_loop(self, user: str, last_booking: float) -> None:
        rng = random.Random(f"{self.seed}-{user}-bookings")
        base = {name: f"http://127.0.0.1:{port}/hook" for name, port in self.receiver_ports.items()}
        with self.client(user) as client:
            while not self.state.stop_load.is_set() and time.time() < last_booking:
                scenario = rng.choice(["point-ok", "point-flaky", "point-down", "term"])
                now = dt.datetime.now(dt.UTC)
                birth = now + dt.timedelta(seconds=rng.uniform(10, 40))
                life_uuid = f"{rng.getrandbits(128):032x}"

                def action(target: str, life: str = life_uuid) -> Action:
                    return Action(
                        path=target,
                        body={"life": life},
                        retry_count=2,
                        retry_interval=1,
                        request_timeout=5,
                    )

                for _ in range(20):
                    try:
                        if scenario == "term":
                            client.book_term(
                                birth_time=birth,
                                death_time=birth + dt.timedelta(seconds=rng.uniform(16, 30)),
                                birth=action(base["ok"]),
                                death=action(base["flaky"]),
                                life_uuid=life_uuid,
                            )
                        else:
                            target = base[scenario.removeprefix("point-")]
                            client.book_point(
                                at=birth,
                                action=action(target),
                                life_uuid=life_uuid,
                            )
                        with self.state.lock:
                            self.state.lives[life_uuid] = scenario
                        break
                    except ApiError as exc:
                        self.count_error("book", exc)
                        if exc.code == "too_late":
                            break
                        time.sleep(1)
                    except YoyakuError as exc:
                        self.count_error("book", exc)
                        time.sleep(1)
                time.sleep(rng.uniform(1.0, 3.0))

    def sampler_loop(self) -> None:
        """Every user's usage (active reservations + queued/running jobs), twice a second, in
        one statement (one snapshot)."""
        sql = """
            SELECT u.username,
                   (SELECT count(*) FROM jobs_job j
                     WHERE j.owner_id = u.id AND j.status IN ('queued', 'running'))
                 + (SELECT count(*) FROM quotas_reservation r
                     WHERE r.user_id = u.id AND r.consumed_at IS NULL
                       AND r.released_at IS NULL AND r.expires_at > now())
            FROM auth_user u WHERE u.username LIKE 'chaos-user-%%'
        """
        conn: psycopg.Connection[Any] | None = None
        while not self.state.stop_load.is_set():
            try:
                if conn is None or conn.closed:
                    conn = self.servers.run_conn()
                rows = conn.execute(sql).fetchall()
                with self.state.lock:
                    self.state.samples += len(rows)
                    self.state.over_limit.extend(
                        f"{name}: {usage} > {CONCURRENT_LIMIT}"
                        for name, usage in rows
                        if usage > CONCURRENT_LIMIT
                    )
            except psycopg.Error:
                conn = None
            time.sleep(0.5)
        if conn is not None:
            conn.close()

    # --- faults ---------------------------------------------------------------------------

    def fault_plan(self, seconds: float) -> list[tuple[float, str]]:
        """(offset, kind), sorted. --ci: one of each kind; else one fault every ~25 s with every
        kind present, Redis twice, PostgreSQL once near the middle."""
        start, end = 0.12 * seconds, 0.85 * seconds
        if self.args.ci:
            kinds = [*FAULT_KINDS, "pg_restart"]
            self.rng.shuffle(kinds)
            step = (end - start) / len(kinds)
            return [(start + i * step, kind) for i, kind in enumerate(kinds)]
        count = max(len(FAULT_KINDS) + 2, int((end - start) / 25))
        kinds = [*FAULT_KINDS, "redis_restart"]
        while len(kinds) < count - 1:
            kinds.append(
                self.rng.choice(["web_kill", "worker_kill", "watcher_kill", "watcher_stop"])
            )
        self.rng.shuffle(kinds)
        kinds.insert(len(kinds) // 2, "pg_restart")
        step = (end - start) / len(kinds)
        return [(start + (i + self.rng.uniform(0.0, 0.5)) * step, k) for i, k in enumerate(kinds)]

    def injector_loop(self, plan: list[tuple[float, str]]) -> None:
        for offset, kind in plan:
            wait = self.load_started + offset - time.time()
            if self.state.stop_load.wait(max(0.0, wait)):
                return
            fault = Fault(kind=kind, at=time.time())
            try:
                getattr(self, f"fault_{kind}")(fault)
            except Exception as exc:
                fault.detail = f"injector error: {exc!r}"
            with self.state.lock:
                self.state.faults.append(fault)
            log(f"fault {kind} {fault.target} {fault.detail}".rstrip())

    def recover_later(self, fault: Fault, check: Callable[[], bool], timeout: float) -> None:
        def watch() -> None:
            if wait_for(check, timeout, interval=0.25):
                fault.recovered_at = time.time()

        threading.Thread(target=watch, daemon=True).start()

    def fault_web_kill(self, fault: Fault) -> None:
        assert self.deployment is not None
        name = self.rng.choice(self.deployment.of_kind("web"))
        fault.target = name
        self.deployment.kill(name)
        fault.at = time.time()
        self.deployment.start(name)
        port = self.deployment.procs[name].port
        self.recover_later(fault, lambda: self.healthy(port), 120)

    def grading_now(self) -> list[tuple[str, str]]:
        """(job id, worker name) of the gradings running now."""
        with self.servers.run_conn() as conn:
            rows = conn.execute(
                "SELECT job_id, worker FROM grading_gradingattempt WHERE outcome = 'running'"
            ).fetchall()
        return [(str(job), str(worker)) for job, worker in rows]

    def fault_worker_kill(self, fault: Fault) -> None:
        """Kill a cluster while one of its workers grades (waits up to 20 s for one)."""
        assert self.deployment is not None
        deadline = time.time() + 20
        victim: tuple[str, str] | None = None
        while time.time() < deadline and victim is None:
            with contextlib.suppress(psycopg.Error):
                for job_id, worker in self.grading_now():
                    name = self.deployment.group_of(int(worker.rpartition(":")[2] or 0))
                    if name is not None:
                        victim = (job_id, name)
                        break
            if victim is None:
                time.sleep(0.2)
        if victim is None:
            name = self.rng.choice(self.deployment.of_kind("worker"))
            fault.detail = "(no grading was running)"
            job_id = ""
        else:
            job_id, name = victim
            fault.detail = f"mid-grade of job {job_id}"
        fault.target = name
        self.deployment.kill(name)
        fault.at = time.time()
        self.deployment.start(name)
        if job_id:
            self.recover_later(fault, lambda: self.job_finished(job_id), 600)
        else:
            fault.recovered_at = fault.at

    def job_finished(self, job_id: str) -> bool:
        with self.servers.run_conn() as conn:
            row = conn.execute("SELECT status FROM jobs_job WHERE id = %s", (job_id,)).fetchone()
        return row is not None and row[0] in ("completed", "failed", "cancelled")

    def claimed_by(self, name: str) -> list[int]:
        """The plans the watcher process `name` has armed (its owner is host:pid)."""
        assert self.deployment is not None
        popen = self.deployment.procs[name].popen
        if popen is None:
            return []
        owner = f"{socket.gethostname()}:{popen.pid}"
        with contextlib.suppress(psycopg.Error), self.servers.run_conn() as conn:
            rows = conn.execute(
                "SELECT id FROM schedule_plan WHERE state = 'Preset' AND lease_owner = %s",
                (owner,),
            ).fetchall()
            return [int(row[0]) for row in rows]
        return []

    def fault_watcher_kill(self, fault: Fault) -> None:
        assert self.deployment is not None
        name = self.rng.choice(self.deployment.of_kind("watcher"))
        fault.target = name
        fault.plans = self.claimed_by(name)
        self.deployment.kill(name)
        fault.at = time.time()
        self.deployment.start(name)
        fault.detail = f"{len(fault.plans)} plans armed"

    def fault_watcher_stop(self, fault: Fault) -> None:
        assert self.deployment is not None
        name = self.rng.choice(self.deployment.of_kind("watcher"))
        pause = WATCHER_LEASE + 4
        fault.target = name
        fault.plans = self.claimed_by(name)
        fault.detail = (
            f"stopped {pause:g} s (lease {WATCHER_LEASE:g} s), {len(fault.plans)} plans armed"
        )
        self.deployment.signal(name, signal.SIGSTOP)
        time.sleep(pause)
        self.deployment.signal(name, signal.SIGCONT)

    def fault_redis_restart(self, fault: Fault) -> None:
        fault.target = "redis"
        self.servers.redis_restart()
        back = time.time()

        def graded_after() -> bool:
            with self.servers.run_conn() as conn:
                row = conn.execute(
                    "SELECT count(*) FROM grading_gradingattempt a JOIN jobs_job j "
                    "ON j.id = a.job_id WHERE j.created_at > to_timestamp(%s) "
                    "AND a.outcome <> 'running'",
                    (back,),
                ).fetchone()
            return row is not None and row[0] > 0

        self.recover_later(fault, graded_after, 300)

    def fault_pg_restart(self, fault: Fault) -> None:
        fault.target = "postgresql"
        started = time.time()
        self.servers.pg_restart()
        wait_for(self.servers.pg_ready, 60)
        ports = list(self.web_ports)
        ok = wait_for(lambda: all(self.healthy(p) for p in ports), 120, interval=0.1)
        ended = time.time()
        # Requests sent just before the restart may be answered just after it.
        self.state.pg_window = (started - 1.0, ended + 2.0)
        if ok:
            fault.recovered_at = ended

    # --- drain and checks -----------------------------------------------------------------

    def drain(self, timeout: float) -> float:
        started = time.time()

        def quiet() -> bool:
            with self.servers.run_conn() as conn:
                jobs = conn.execute(
                    "SELECT count(*) FROM jobs_job WHERE status IN ('queued', 'running')"
                ).fetchone()
                plans = conn.execute(
                    "SELECT count(*) FROM schedule_plan WHERE state IN "
                    "('Standby', 'Preset', 'Running')"
                ).fetchone()
            return bool(jobs and plans and jobs[0] == 0 and plans[0] == 0)

        wait_for(quiet, timeout, interval=1.0)
        return time.time() - started

    def run(self) -> int:
        args = self.args
        seconds = args.minutes * 60
        self.setup()
        plan = self.fault_plan(seconds)
        log(f"load for {seconds:g} s; faults at " + ", ".join(f"{o:.0f}s {k}" for o, k in plan))
        self.load_started = time.time()
        last_booking = self.load_started + seconds - 35
        threads = [
            threading.Thread(target=self.user_loop, args=(f"chaos-user-{u}", index))
            for u in range(args.users)
            for index in range(2)
        ]
        threads += [
            threading.Thread(target=self.reviewer_loop, args=(f"chaos-reviewer-{r}",))
            for r in range(2)
        ]
        threads += [
            threading.Thread(target=self.booking_loop, args=(f"chaos-user-{u}", last_booking))
            for u in range(2)
        ]
        threads.append(threading.Thread(target=self.sampler_loop))
        injector = threading.Thread(target=self.injector_loop, args=(plan,))
        for thread in threads:
            thread.start()
        injector.start()
        time.sleep(max(0.0, self.load_started + seconds - time.time()))
        self.state.stop_load.set()
        injector.join()
        for thread in threads:
            thread.join()
        self.load_ended = time.time()
        log(f"load stopped; draining (at most {args.drain:g} s)")
        drained = self.drain(args.drain)
        log(f"drained in {drained:.0f} s")
        time.sleep(2)  # late recoveries and receivers settle
        # What the hourly cleanup does after its grace: delete stored uploads no row names
        # (a web process killed between storing an upload and committing its row).
        assert self.deployment is not None
        self.deployment.env["STORED_ORPHAN_GRACE_MINUTES"] = "0"
        swept = self.deployment.manage("cleanup", "--only", "orphan_files").strip()
        self.state.orphans_swept = swept.splitlines()[0] if swept else ""
        log(f"cleanup: {self.state.orphans_swept}")
        return self.report()

    def report(self) -> int:
        rows, figures = Checks(self).run()
        width = max(len(name) for name, _, _ in rows)
        print()
        print(f"{'invariant':<{width}}  {'checked':>8}  {'violations':>10}")
        print(f"{'-' * width}  {'-' * 8}  {'-' * 10}")
        for name, checked, violations in rows:
            print(f"{name:<{width}}  {checked:>8}  {len(violations):>10}")
        failed = [(name, v) for name, _, v in rows if v]
        for name, violations in failed:
            print(f"\n{name}:")
            for line in violations[:10]:
                print(f"  - {line}")
            if len(violations) > 10:
                print(f"  ... and {len(violations) - 10} more")
        print()
        for name, value in figures:
            print(f"{name:<{width}}  {value}")
        print()
        print(f"seed {self.seed} · logs {self.run_dir}")
        print("RESULT: " + ("FAIL" if failed else "PASS"), flush=True)
        return 1 if failed else 0

    def cleanup(self, *, keep_db: bool = False) -> None:
        if self.deployment is not None:
            self.deployment.stop_all()
        if self.moto is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.moto.pid, signal.SIGKILL)
            self.moto.wait()
        self.receivers.stop()
        if not self.servers.pg_ready():
            wait_for(self.servers.pg_ready, 60)
        if not self.servers.redis_ready():
            wait_for(self.servers.redis_ready, 30)
        if keep_db:
            log(f"database kept: {self.servers.url_for(self.servers.run_db)}")
        else:
            self.servers.drop_db()
        self.servers.redis_clear()


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


class Checks:
    """The invariants, from the database, the bucket and the receivers' log."""

    def __init__(self, chaos: Chaos) -> None:
        self.chaos = chaos
        self.state = chaos.state

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with self.chaos.servers.run_conn() as conn:
            return conn.execute(sql, params).fetchall()

    def run(self) -> tuple[list[tuple[str, int, list[str]]], list[tuple[str, str]]]:
        rows = [
            self.keys(),
            self.concurrency(),
            self.graded_once(),
            self.stuck(),
            *self.plans(),
            self.store(),
            *self.answers(),
            self.created_count(),
            self.reviewed_once(),
        ]
        return rows, self.figures()

    def keys(self) -> tuple[str, int, list[str]]:
        bad = [
            f"user {user} key {key}: jobs {', '.join(sorted(jobs))}"
            for (user, key), jobs in self.state.key_jobs.items()
            if len(jobs) > 1
        ]
        db = self.query(
            "SELECT user_id, key, count(DISTINCT job_id) FROM jobs_idempotencykey "
            "GROUP BY user_id, key HAVING count(DISTINCT job_id) > 1"
        )
        bad += [f"database: user {u} key {k} bound to {n} jobs" for u, k, n in db]
        checked = len(self.state.key_jobs)
        return "no idempotency key bound to two jobs", checked, bad

    def concurrency(self) -> tuple[str, int, list[str]]:
        return (
            f"no user over max_concurrent_jobs={CONCURRENT_LIMIT} (sampled)",
            self.state.samples,
            list(self.state.over_limit),
        )

    def graded_once(self) -> tuple[str, int, list[str]]:
        jobs = self.query(
            "SELECT j.id, j.status, j.finished_at IS NOT NULL, "
            "count(a.id) FILTER (WHERE a.outcome IN ('completed', 'review_pending', 'failed')), "
            "min(a.outcome) FILTER (WHERE a.outcome IN ('completed', 'review_pending', 'failed')) "
            "FROM jobs_job j LEFT JOIN grading_gradingattempt a ON a.job_id = j.id "
            "GROUP BY j.id, j.status, j.finished_at"
        )
        bad: list[str] = []
        for job_id, status, finished, results, outcome in jobs:
            if results != 1:
                bad.append(f"job {job_id} ({status}): {results} successful grading attempts")
            elif not finished:
                bad.append(f"job {job_id}: result recorded but the job is {status}")
            elif (status == "failed") != (outcome == "failed"):
                bad.append(f"job {job_id} is {status} but its grading was {outcome}")
        known = {row[0] for row in jobs}
        bad += [
            f"accepted job {j} is not in the database" for j in self.state.accepted_jobs - known
        ]
        return "every accepted job graded exactly once", len(jobs), bad

    def stuck(self) -> tuple[str, int, list[str]]:
        jobs = self.query("SELECT id, status FROM jobs_job")
        subs = self.query(
            "SELECT id, status FROM submissions_submission "
            "WHERE status IN ('pending', 'processing')"
        )
        bad = [f"job {j} still {s}" for j, s in jobs if s in ("queued", "running")]
        bad += [f"submission {i} still {s}" for i, s in subs]
        return "no job stuck queued/running after the drain", len(jobs), bad

    def plans(self) -> list[tuple[str, int, list[str]]]:
        plans = self.query(
            "SELECT l.life_uuid, p.kind, p.state, p.webhook_id, "
            "(SELECT count(*) FROM schedule_planattempt a WHERE a.plan_id = p.id) "
            "FROM schedule_plan p JOIN schedule_life l ON l.id = p.life_id"
        )
        deliveries = list(self.chaos.receivers.deliveries)
        by_plan: dict[tuple[str, str], list[Delivery]] = collections.defaultdict(list)
        for d in deliveries:
            by_plan[(d.life_uuid, d.plan)].append(d)
        once: list[str] = []
        lost: list[str] = []
        booked = dict(self.state.lives)
        seen_lives = {row[0] for row in plans}
        lost += [
            f"life {u} booked ({s}) but not in the database"
            for u, s in booked.items()
            if u not in seen_lives
        ]
        for life_uuid, kind, state, webhook_id, _attempts in plans:
            got = by_plan.get((life_uuid, kind), [])
            ids = {d.webhook_id for d in got}
            if ids - {webhook_id}:
                once.append(f"{life_uuid}/{kind}: delivered under webhook-ids {sorted(ids)}")
            successes = [d for d in got if 200 <= d.status < 300]
            if len(successes) > 1:
                once.append(f"{life_uuid}/{kind}: {len(successes)} successful deliveries")
            scenario = booked.get(life_uuid, "")
            if scenario == "point-down":
                if state != "Failed" or not got:
                    lost.append(f"{life_uuid}/{kind} (failing receiver): {state}, {len(got)} tries")
                elif len(got) != 3:
                    lost.append(f"{life_uuid}/{kind}: {len(got)} attempts on a failing receiver")
            elif state != "Done" or not successes:
                lost.append(f"{life_uuid}/{kind}: {state}, {len(successes)} successful deliveries")
        return [
            ("every plan fired once per webhook-id", len(plans), once),
            ("no plan lost (each fired, final state agrees)", len(plans), lost),
            (
                "every delivery signed (Standard Webhooks)",
                len(deliveries),
                [
                    f"{d.life_uuid}/{d.plan}: bad signature"
                    for d in deliveries
                    if not d.signature_ok
                ],
            ),
        ]

    def store(self) -> tuple[str, int, list[str]]:
        names = {
            row[0] for row in self.query("SELECT storage_name FROM submissions_submissionfile")
        }
        objects: set[str] = set()
        paginator = self.chaos.s3().get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=BUCKET):
            objects.update(item["Key"] for item in page.get("Contents", []))
        bad = [f"orphan object {key}" for key in sorted(objects - names)]
        bad += [f"lost file {name}" for name in sorted(names - objects)]
        return (
            "every object referenced (after the sweep), every file present",
            len(names | objects),
            bad,
        )

    def answers(self) -> list[tuple[str, int, list[str]]]:
        answers = list(self.state.answers)
        window = self.state.pg_window
        outside: list[str] = []
        shape: list[str] = []
        for a in answers:
            if a.status < 500:
                continue
            stamp = time.strftime("%H:%M:%S", time.localtime(a.at))
            if not a.json_error_body:
                shape.append(f"{stamp} {a.status} {a.path}: not the JSON error body")
            inside = window is not None and window[0] <= a.at <= window[1]
            if not inside:
                outside.append(f"{stamp} {a.status} {a.path}")
            elif a.status != 503:
                shape.append(f"{stamp} {a.status} {a.path} during the PostgreSQL restart")
        return [
            ("no 5xx outside the PostgreSQL restart", len(answers), outside),
            ("every 5xx is 503 with the JSON error body", len(answers), shape),
        ]

    def created_count(self) -> tuple[str, int, list[str]]:
        server = self.query("SELECT count(*) FROM jobs_job")[0][0]
        client = len(self.state.created_jobs)
        bad = [] if server == client else [f"client created {client}, server has {server}"]
        return "client's created jobs = server's jobs", int(server), bad

    def reviewed_once(self) -> tuple[str, int, list[str]]:
        rows = self.query(
            "SELECT submission_id, count(*) FROM review_reviewrecord GROUP BY submission_id"
        )
        bad = [f"submission {s} reviewed {n} times" for s, n in rows if n > 1]
        return "no submission reviewed twice", len(rows), bad

    def watcher_recovery(self, fault: Fault) -> None:
        """When the last plan the watcher had armed at the fault made its first attempt, or,
        for a plan due later than the fault, how late it was: recovered = fault + the worst."""
        if not fault.plans:
            fault.recovered_at = fault.at
            return
        rows = self.query(
            "SELECT extract(epoch FROM p.time), extract(epoch FROM min(a.started_at)) "
            "FROM schedule_plan p LEFT JOIN schedule_planattempt a ON a.plan_id = p.id "
            "WHERE p.id = ANY(%s) GROUP BY p.id, p.time",
            fault.plans,
        )
        if any(started is None for _, started in rows):
            return
        worst = max(float(started) - max(float(due), fault.at) for due, started in rows)
        fault.recovered_at = fault.at + max(0.0, worst)

    def figures(self) -> list[tuple[str, str]]:
        chaos = self.chaos
        seconds = max(1.0, chaos.load_ended - chaos.load_started)
        answers = [a for a in self.state.answers if a.at <= chaos.load_ended]
        gradings = self.query(
            "SELECT count(*) FROM grading_gradingattempt "
            "WHERE outcome IN ('completed', 'review_pending', 'failed')"
        )[0][0]
        lateness = [
            float(row[0])
            for row in self.query(
                "SELECT extract(epoch FROM a.started_at - p.time) * 1000 "
                "FROM schedule_planattempt a JOIN schedule_plan p ON p.id = a.plan_id "
                "WHERE a.number = 1"
            )
        ]
        redone = self.query(
            "SELECT count(*) FROM grading_gradingattempt "
            "WHERE outcome IN ('abandoned', 'lease_lost')"
        )[0][0]
        figures = [
            ("load", f"{seconds:.0f} s, {len(chaos.state.accepted_jobs)} jobs accepted"),
            ("requests/s", f"{len(answers) / seconds:.1f} ({len(answers)} requests)"),
            ("gradings/s", f"{gradings / seconds:.2f} ({gradings} gradings, {redone} re-run)"),
            (
                "plan lateness p50 / p99",
                f"{percentile(lateness, 50):.0f} / {percentile(lateness, 99):.0f} ms "
                f"({len(lateness)} plans)",
            ),
            ("reviews completed", str(self.state.reviews_done)),
            ("orphan uploads swept at the end", self.state.orphans_swept or "none"),
        ]
        by_kind: dict[str, list[Fault]] = collections.defaultdict(list)
        for fault in self.state.faults:
            by_kind[fault.kind].append(fault)
        for fault in self.state.faults:
            if fault.kind.startswith("watcher_"):
                self.watcher_recovery(fault)
        for kind in [*FAULT_KINDS, "pg_restart"]:
            faults = by_kind.get(kind, [])
            times = [f.recovered_at - f.at for f in faults if f.recovered_at is not None]
            missing = len(faults) - len(times)
            text = f"{len(faults)} injected"
            if times:
                median = statistics.median(times)
                text += f", recovered in median {median:.1f} s, max {max(times):.1f} s"
            if missing:
                text += f", {missing} not recovered"
            figures.append((f"recovery: {kind}", text))
        errors = ", ".join(f"{k} {n}" for k, n in self.state.load_errors.most_common(8))
        figures.append(("client errors seen (retried)", errors or "none"))
        return figures


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
