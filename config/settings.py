"""Yoyaku settings.

Every value is read once from the environment (django-environ). Every SPEC parameter is a
Django setting of the same name with the SPEC's default, overridable by an environment variable
of that name. Numbers accept fractions so tests and demos can shrink time.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import django_stubs_ext
import environ
from django.core.exceptions import ImproperlyConfigured

from apps.core.api.converters import PATH_CONVERTER_SCHEMAS

# Lets generic classes (ModelAdmin[Model], QuerySet[Model]) be subscripted at run time.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


def env_number(name: str, default: float) -> int | float:
    """A number from the environment: an int when integral, else a float ("0.05" is fine)."""
    raw = env.str(name, default=str(default))
    try:
        value = float(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from exc
    return int(value) if value.is_integer() else value


def env_mapping(name: str, default: str) -> dict[str, float]:
    """`small=1,medium=2,large=4` -> {"small": 1, "medium": 2, "large": 4}."""
    result: dict[str, float] = {}
    for item in env.str(name, default=default).split(","):
        if not item.strip():
            continue
        key, _, value = item.partition("=")
        try:
            number = float(value)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: bad entry {item!r}") from exc
        result[key.strip()] = int(number) if number.is_integer() else number
    return result


# --- Deployment -------------------------------------------------------------------------------
DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY is required when DEBUG is off.")
    SECRET_KEY = "django-insecure-yoyaku-development-only"  # noqa: S105 - DEBUG only
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Database sessions that refuse a key Django could not have made (a quoted `\000` is a NUL).
SESSION_ENGINE = "apps.core.sessions"
# With DEBUG off the session and CSRF cookies are sent over HTTPS only; a plain-HTTP deployment
# (behind a TLS-terminating proxy that talks HTTP to us) or a loopback test sets them off.
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
# HSTS is a promise to browsers that outlives the deployment: off unless the operator sets it.
SECURE_HSTS_SECONDS = int(env_number("SECURE_HSTS_SECONDS", 0))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
# Silenced on purpose (docs/decisions.md): whether every subdomain serves HTTPS, and whether to
# put the domain on the browsers' preload list, are the domain owner's decisions, not this
# application's; both are settable above.
SILENCED_SYSTEM_CHECKS = ["security.W005", "security.W021"]
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    # Before django_q: its `qcluster` command replaces django-q2's (apps/core/cluster.py).
    "apps.core",
    "django_q",
    "axes",
    "apps.submissions",
    "apps.quotas",
    "apps.jobs",
    "apps.grading",
    "apps.review",
    "apps.schedule",
]

MIDDLEWARE = [
    # First: the request id, log context and HTTP metrics cover every response.
    "apps.core.middleware.RequestObservabilityMiddleware",
    "apps.core.middleware.RequestHeadLimitsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "apps.core.middleware.ApiJsonErrorMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "apps.schedule.middleware.HeaderBookingMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a locked-out login into `login_lockout_response`.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apps.core.context_processors.reviewer",
            ],
        },
    },
]

# --- Database ---------------------------------------------------------------------------------
# SQLite is the embedded default. BEGIN IMMEDIATE makes every write transaction take the
# database's write lock up front, so concurrent read-modify-write transactions queue behind the
# busy timeout instead of failing with "database is locked" (select_for_update is a no-op there).
DATABASES: dict[str, dict[str, Any]] = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
}
_db = DATABASES["default"]
if _db["ENGINE"] == "django.db.backends.sqlite3":
    _db["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": env_number("SQLITE_BUSY_TIMEOUT", 30),
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # A file, not Django's shared-cache in-memory database: shared-cache locks are table locks
    # that ignore the busy timeout, which would make every threaded race test flaky.
    _db["TEST"] = {"NAME": str(BASE_DIR / ".test-db.sqlite3")}
# Measured here: closing the connection after each request costs 2.7-3x throughput on
# PostgreSQL; on SQLite a grading worker that reopens it for every task (django-q2 closes old
# connections before each) pays the connect, the PRAGMAs and the close's WAL checkpoint.
_db["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
_db["CONN_HEALTH_CHECKS"] = True
if _db["ENGINE"] != "django.db.backends.sqlite3":
    # Opt-in: server-side binding lets psycopg prepare repeated statements (measured: about
    # 40 % less PostgreSQL CPU per submission); behind a transaction-pooling pgbouncer it
    # needs the pooler's own prepared-statement support.
    _prepare = env.str("DATABASE_PREPARE_THRESHOLD", default="")
    if _prepare:
        _db.setdefault("OPTIONS", {}).update(
            {"server_side_binding": True, "prepare_threshold": int(_prepare)}
        )
    # Behind a transaction-pooling PgBouncer: `QuerySet.iterator()` opens no server-side
    # cursor (one would not survive the pooler handing the connection to another client).
    _db["DISABLE_SERVER_SIDE_CURSORS"] = env.bool(
        "DATABASE_DISABLE_SERVER_SIDE_CURSORS", default=False
    )
DATABASES["default"]["ATOMIC_REQUESTS"] = False
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Auth, i18n -------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# django-axes first: it refuses a locked-out (username, IP) pair before any password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/submit/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.str("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

# --- Login rate limit (django-axes) ---------------------------------------------------------
# Every login form (admin, /accounts/login/) goes through `authenticate()`, where axes counts
# failures per (username, client IP): AXES_FAILURE_LIMIT failures lock that pair out for
# AXES_COOLOFF_MINUTES (restarted by each attempt made while locked), even with the right
# password. The client IP is `apps.core.client_address.client_ip`: the socket address, or the
# address TRUSTED_PROXY_COUNT proxies vouch for in X-Forwarded-For (docs/deploy.md).
AXES_ENABLED = env.bool("AXES_ENABLED", default=True)
AXES_FAILURE_LIMIT = int(env_number("AXES_FAILURE_LIMIT", 5))
AXES_COOLOFF_TIME = dt.timedelta(minutes=float(env_number("AXES_COOLOFF_MINUTES", 15)))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "apps.core.lockout.login_lockout_response"
AXES_VERBOSE = False
AXES_CLIENT_IP_CALLABLE = "apps.core.client_address.client_ip"

# --- Client address behind proxies -----------------------------------------------------------
# How many reverse proxies in front of the web process append to X-Forwarded-For. 0 (default):
# the header is ignored and the client is the socket address. N: the entry N from the right
# (one nginx or Caddy in front: 1). Too high lets a client choose its address; too low makes
# every client share the proxy's (docs/deploy.md#behind-a-reverse-proxy).
TRUSTED_PROXY_COUNT = int(env_number("TRUSTED_PROXY_COUNT", 0))
if TRUSTED_PROXY_COUNT < 0:
    raise ImproperlyConfigured("TRUSTED_PROXY_COUNT must be 0 or more.")

# --- Static and media -------------------------------------------------------------------------
STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_USE_FINDERS = DEBUG
MEDIA_ROOT = Path(env.str("MEDIA_ROOT", default=str(BASE_DIR / "media")))
MEDIA_URL = "/media/"

STORAGES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# S3 (or any S3-compatible store) through django-storages when a bucket is configured.
AWS_STORAGE_BUCKET_NAME = env.str("AWS_STORAGE_BUCKET_NAME", default="")
if AWS_STORAGE_BUCKET_NAME:
    STORAGES["default"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": AWS_STORAGE_BUCKET_NAME,
            "endpoint_url": env.str("AWS_S3_ENDPOINT_URL", default="") or None,
            "region_name": env.str("AWS_S3_REGION_NAME", default="") or None,
            "access_key": env.str("AWS_ACCESS_KEY_ID", default="") or None,
            "secret_key": env.str("AWS_SECRET_ACCESS_KEY", default="") or None,
            "file_overwrite": False,
            "default_acl": None,
        },
    }

# Uploads stream to a temporary file from the first byte; nothing large is kept in memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 0
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
# The request head the app accepts (JSON 414 / 431 beyond). gunicorn's own limits
# (config/gunicorn.py) sit above these, so the app answers first.
MAX_URL_LENGTH = int(env_number("MAX_URL_LENGTH", 4096))
MAX_REQUEST_HEADERS = int(env_number("MAX_REQUEST_HEADERS", 100))
MAX_REQUEST_HEADER_SIZE = int(env_number("MAX_REQUEST_HEADER_SIZE", 8190))
FILE_UPLOAD_TEMP_DIR = env.str("FILE_UPLOAD_TEMP_DIR", default="") or None
# Slow clients (config/server): a request head must be complete within REQUEST_HEADER_TIMEOUT
# seconds; a body must average REQUEST_BODY_MIN_RATE bytes/s after its first
# REQUEST_BODY_TIMEOUT seconds and carry at most MAX_REQUEST_BODY_SIZE bytes on an upload route
# (default: the largest upload request the API accepts, with its form fields and part headers),
# MAX_REQUEST_BODY_SIZE_DEFAULT elsewhere.
REQUEST_HEADER_TIMEOUT = env_number("REQUEST_HEADER_TIMEOUT", 10)
REQUEST_BODY_TIMEOUT = env_number("REQUEST_BODY_TIMEOUT", 10)
REQUEST_BODY_MIN_RATE = env_number("REQUEST_BODY_MIN_RATE", 1024)

# --- REST framework and OpenAPI ---------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.core.authentication.BearerOrTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
        "apps.schedule.authentication.ScheduleWebhookAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [
        "apps.core.api.parsers.BoundedJSONParser",
        "rest_framework.parsers.MultiPartParser",
        "rest_framework.parsers.FormParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "apps.core.api.schema.ApiAutoSchema",
    "EXCEPTION_HANDLER": "apps.core.handlers.api_exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # Throttles key on the same client address as the lock-out (never on a forged header).
    "NUM_PROXIES": TRUSTED_PROXY_COUNT,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Yoyaku API",
    "DESCRIPTION": (
        "Job submission where every side effect happens exactly once: idempotent jobs, atomic "
        "quota reservations, sequential multi-file uploads, grading, review claims and "
        "webhook reservations. Every error has the body "
        '`{"success": false, "code": "...", "error": "..."}`.'
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": r"/api/",
    "APPEND_COMPONENTS": {
        "securitySchemes": {
            "bearerAuth": {"type": "http", "scheme": "bearer"},
        }
    },
    "SECURITY": [{"bearerAuth": []}],
    "ENUM_NAME_OVERRIDES": {
        "SubmissionStatusEnum": "apps.submissions.models.SubmissionStatus",
        "JobStatusEnum": "apps.jobs.models.JobStatus",
        "ReservationStateEnum": "apps.quotas.models.ReservationState",
        "LifeStateEnum": "apps.schedule.models.LifeState",
        "PlanStateEnum": "apps.schedule.models.PlanState",
        "TaskRunStateEnum": "apps.schedule.models.TaskRun.State",
    },
    # Path parameters carry the pattern of the path converter that checks them.
    "PATH_CONVERTER_OVERRIDES": PATH_CONVERTER_SCHEMAS,
}

# --- Task queue (django-q2) -------------------------------------------------------------------
REDIS_URL = env.str("REDIS_URL", default="")

# --- Quotas and jobs (SPEC §3) ----------------------------------------------------------------
QUOTA_MAX_CONCURRENT_JOBS = int(env_number("QUOTA_MAX_CONCURRENT_JOBS", 5))
QUOTA_MAX_JOBS_PER_DAY = int(env_number("QUOTA_MAX_JOBS_PER_DAY", 100))
_cost_limit = env.str("QUOTA_MONTHLY_COST_LIMIT", default="")
QUOTA_MONTHLY_COST_LIMIT: float | None = float(_cost_limit) if _cost_limit else None
RESOURCE_CLASS_COSTS = env_mapping("RESOURCE_CLASS_COSTS", "small=1,medium=2,large=4")
DEFAULT_RESOURCE_CLASS = env.str("DEFAULT_RESOURCE_CLASS", default="medium")
# Most extra concurrent-job slots a `quota.boost` may grant (per call, and in total per user).
QUOTA_MAX_BOOST = int(env_number("QUOTA_MAX_BOOST", 100))
QUOTA_RESERVATION_TTL = env_number("QUOTA_RESERVATION_TTL", 300)
QUOTA_RESERVATION_MAX_TTL = env_number("QUOTA_RESERVATION_MAX_TTL", 3600)
IDEMPOTENCY_KEY_TTL_HOURS = env_number("IDEMPOTENCY_KEY_TTL_HOURS", 24)
IDEMPOTENCY_LOCK_TIMEOUT = env_number("IDEMPOTENCY_LOCK_TIMEOUT", 60)
# Bytes of submission files (drafts and sealed) a user may keep; a QuotaPolicy row overrides.
QUOTA_MAX_STORAGE_BYTES = int(env_number("QUOTA_MAX_STORAGE_BYTES", 10 * 1024**3))

# --- Submissions (SPEC §4) --------------------------------------------------------------------
MAX_UPLOAD_FILE_SIZE = int(env_number("MAX_UPLOAD_FILE_SIZE", 104857600))
ALLOWED_UPLOAD_EXTENSIONS = env.list(
    "ALLOWED_UPLOAD_EXTENSIONS", default=[".py", ".yaml", ".zip", ".tar.gz"]
)
MAX_FILES_PER_SUBMISSION = int(env_number("MAX_FILES_PER_SUBMISSION", 100))
# Bytes of files one POST /api/submissions/ (bulk mode) may carry: larger sets go file by file.
MAX_SUBMISSION_REQUEST_SIZE = int(env_number("MAX_SUBMISSION_REQUEST_SIZE", 1024**3))
MAX_REQUEST_BODY_SIZE = int(
    env_number(
        "MAX_REQUEST_BODY_SIZE",
        max(MAX_SUBMISSION_REQUEST_SIZE, MAX_UPLOAD_FILE_SIZE)
        + DATA_UPLOAD_MAX_MEMORY_SIZE
        + 64 * 1024,
    )
)
# Every other request body (and an upload without a credential) carries at most this much; the
# routes named here take MAX_REQUEST_BODY_SIZE (config/server/heads.py).
MAX_REQUEST_BODY_SIZE_DEFAULT = int(env_number("MAX_REQUEST_BODY_SIZE_DEFAULT", 4 * 1024 * 1024))
UPLOAD_URL_NAMES = ["submission-list", "submission-files"]
# Bytes of request bodies one web worker holds at once (memory and disk); past it, 503.
REQUEST_SPOOL_BUDGET = int(env_number("REQUEST_SPOOL_BUDGET", MAX_REQUEST_BODY_SIZE))
SUBMISSION_DRAFT_TTL_DAYS = env_number("SUBMISSION_DRAFT_TTL_DAYS", 7)
# Stored uploads no file row names (a web process killed between storing and committing) are
# deleted by the `orphan_files` cleanup once this old: longer than any upload takes.
STORED_ORPHAN_GRACE_MINUTES = env_number("STORED_ORPHAN_GRACE_MINUTES", 60)

# --- Grading and review (SPEC §5) -------------------------------------------------------------
GRADER = env.str("GRADER", default="apps.grading.grader.SandboxGrader")
GRADING_TIMEOUT = env_number("GRADING_TIMEOUT", 600)
GRADING_MAX_ATTEMPTS = int(env_number("GRADING_MAX_ATTEMPTS", 3))
GRADING_MEMORY_LIMIT = int(env_number("GRADING_MEMORY_LIMIT", 1073741824))
GRADING_MAX_OUTPUT = int(env_number("GRADING_MAX_OUTPUT", 1048576))
GRADING_MAX_UNPACKED_SIZE = int(env_number("GRADING_MAX_UNPACKED_SIZE", 1073741824))
MAX_ARCHIVE_MEMBERS = int(env_number("MAX_ARCHIVE_MEMBERS", 10000))
# Isolation (SPEC §10): the sandbox's interpreter (never the platform's), extra read-only folders
# (a grading virtualenv), and the one way to grade without bubblewrap when DEBUG is off.
GRADING_PYTHON = env.str("GRADING_PYTHON", default="/usr/bin/python3")
GRADING_READONLY_PATHS = env.list("GRADING_READONLY_PATHS", default=[])
GRADING_ALLOW_UNSANDBOXED = env.bool("GRADING_ALLOW_UNSANDBOXED", default=False)
# The sandbox's writable space (working folder + /tmp, a RAM-backed tmpfs; the submission's
# files count against it), tasks (threads included) and open files.
GRADING_SCRATCH_SIZE = int(env_number("GRADING_SCRATCH_SIZE", 2147483648))
GRADING_MAX_PROCESSES = int(env_number("GRADING_MAX_PROCESSES", 64))
GRADING_MAX_OPEN_FILES = int(env_number("GRADING_MAX_OPEN_FILES", 256))
_score_min = env.str("GRADING_SCORE_MIN", default="")
_score_max = env.str("GRADING_SCORE_MAX", default="")
GRADING_SCORE_MIN: float | None = float(_score_min) if _score_min else None
GRADING_SCORE_MAX: float | None = float(_score_max) if _score_max else None
REVIEW_CLAIM_TTL = env_number("REVIEW_CLAIM_TTL", 900)
# Off: the leaderboard API and page need authentication like everything else (SPEC §10).
LEADERBOARD_PUBLIC = env.bool("LEADERBOARD_PUBLIC", default=True)

# --- Schedule (SPEC §6) -----------------------------------------------------------------------
BOOKING_PLAN_WATCH_INTERVAL = env_number("BOOKING_PLAN_WATCH_INTERVAL", 10000)  # ms
PRESET_EXECUTION_TIME = env_number("PRESET_EXECUTION_TIME", 5)  # min
MINIMUM_LIFE_TERM = env_number("MINIMUM_LIFE_TERM", 3)  # min
EXECUTION_GUARD_TIME = env_number("EXECUTION_GUARD_TIME", 30)  # s
EXECUTION_DELAY_GUARD_TIME = env_number("EXECUTION_DELAY_GUARD_TIME", 60)  # min
BIRTH_DELAY_LIMIT_TIME = env_number("BIRTH_DELAY_LIMIT_TIME", 3)  # min
DEATH_RETRY_INTERVAL = env_number("DEATH_RETRY_INTERVAL", 1)  # min
SCHEDULE_HISTORY_DURATION_DAYS = env_number("SCHEDULE_HISTORY_DURATION_DAYS", 1)
TIMEDOUT_QUEUE_MAX_SIZE = int(env_number("TIMEDOUT_QUEUE_MAX_SIZE", 256))
EXECUTION_RETRY_CODES = [
    int(code)
    for code in env.list("EXECUTION_RETRY_CODES", default=["500", "502", "503", "504", "599"])
]
# Lives not yet Dead/Stillbirth a user may hold (429 too_many_lives beyond).
SCHEDULE_MAX_LIVES_PER_USER = int(env_number("SCHEDULE_MAX_LIVES_PER_USER", 1000))
# Days a Life holding a `resource_id` may span, birth to death (400 invalid_schedule beyond):
# no booking can keep a resource from everyone else for longer.
SCHEDULE_MAX_TERM = env_number("SCHEDULE_MAX_TERM", 30)
# Hard limit (s) on one action attempt, connect to last byte read, whatever its timeouts say:
# one user's slow receivers can hold a plan thread no longer than this per attempt.
SCHEDULE_ACTION_MAX_SECONDS = env_number("SCHEDULE_ACTION_MAX_SECONDS", 30)
SCHEDULE_TIMEZONE = env.str("SCHEDULE_TIMEZONE", default=TIME_ZONE)
SCHEDULE_WEBHOOK_BASE_URL = env.str("SCHEDULE_WEBHOOK_BASE_URL", default="http://127.0.0.1:8000")
SCHEDULE_WEBHOOK_ALLOWED_HOSTS = env.list("SCHEDULE_WEBHOOK_ALLOWED_HOSTS", default=[])
SCHEDULE_WEBHOOK_SECRET = env.str("SCHEDULE_WEBHOOK_SECRET", default="")
if not SCHEDULE_WEBHOOK_SECRET:
    if not DEBUG:
        raise ImproperlyConfigured("SCHEDULE_WEBHOOK_SECRET is required when DEBUG is off.")
    # base64 of "yoyaku-development-webhook-secret": a Standard Webhooks secret for DEBUG only.
    SCHEDULE_WEBHOOK_SECRET = "whsec_eW95YWt1LWRldmVsb3BtZW50LXdlYmhvb2stc2VjcmV0"  # noqa: S105

# django-q2: `retry` must exceed `timeout`, which must exceed the longest task's own limit
# (grading), or the broker re-delivers a task that is still running.
Q_TIMEOUT = int(env_number("Q_TIMEOUT", max(GRADING_TIMEOUT + 60, 120)))
Q_CLUSTER: dict[str, Any] = {
    "name": "yoyaku",
    "workers": int(env_number("Q_WORKERS", 2)),
    "timeout": Q_TIMEOUT,
    "retry": int(env_number("Q_RETRY", Q_TIMEOUT + 60)),
    "max_attempts": int(env_number("Q_MAX_ATTEMPTS", 10)),
    # Successful results are not stored: writing and trimming them halves throughput and nothing
    # reads them. Failures are kept for operators (admin: Failed tasks).
    "save_limit": -1,
    "ack_failures": True,
    "catch_up": False,
    "poll": env_number("Q_POLL", 0.2),
    "label": "Task queue",
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"

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
    "filters": {"context": {"()": "apps.core.logcontext.ContextFilter"}},
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
