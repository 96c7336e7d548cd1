"""Deployment, applications, database, authentication, static files, request limits and the
REST framework."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from apps.core.api.converters import PATH_CONVERTER_SCHEMAS
from config.settings.environment import ROOT, env, env_number

BASE_DIR = ROOT

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
    "apps.benchmarks",
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
        # The plan kind keeps its name now that phases have a kind too.
        "KindEnum": "apps.schedule.models.PlanKind",
        "PhaseKindEnum": "apps.benchmarks.models.PhaseKind",
        "ChallengeVisibilityEnum": "apps.benchmarks.models.Visibility",
        "ChallengeParticipationEnum": "apps.benchmarks.models.Participation",
        "MetricDirectionEnum": "apps.benchmarks.models.Direction",
        "PhaseRevealEnum": "apps.benchmarks.models.Reveal",
        "ParticipantStatusEnum": "apps.benchmarks.models.ParticipantStatus",
    },
    # Path parameters carry the pattern of the path converter that checks them.
    "PATH_CONVERTER_OVERRIDES": PATH_CONVERTER_SCHEMAS,
}
