"""The product's parameters: the task queue, quotas and jobs, submissions, grading and review,
schedules."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

from config.settings.base import DATA_UPLOAD_MAX_MEMORY_SIZE, DEBUG, TIME_ZONE
from config.settings.environment import env, env_mapping, env_number

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
UPLOAD_URL_NAMES = ["submission-list", "submission-files", "challenge-list"]
# Bytes of request bodies one web worker holds at once (memory and disk); past it, 503. The
# last REQUEST_SPOOL_RESERVE of them only bodies within MAX_REQUEST_BODY_SIZE_DEFAULT may take.
REQUEST_SPOOL_RESERVE = int(env_number("REQUEST_SPOOL_RESERVE", 8 * MAX_REQUEST_BODY_SIZE_DEFAULT))
REQUEST_SPOOL_BUDGET = int(
    env_number("REQUEST_SPOOL_BUDGET", MAX_REQUEST_BODY_SIZE + REQUEST_SPOOL_RESERVE)
)
# Bytes of bodies within MAX_REQUEST_BODY_SIZE_DEFAULT one client address (apps/core/
# client_address.py) holds at once in a worker: four such bodies in flight, half the reserve.
# Bodies allowed more (uploads with a credential) are held apart, up to MAX_REQUEST_BODY_SIZE.
REQUEST_SPOOL_PER_CLIENT = int(
    env_number("REQUEST_SPOOL_PER_CLIENT", 4 * MAX_REQUEST_BODY_SIZE_DEFAULT)
)
SUBMISSION_DRAFT_TTL_DAYS = env_number("SUBMISSION_DRAFT_TTL_DAYS", 7)
# Stored uploads no file row names (a web process killed between storing and committing) are
# deleted by the `orphan_files` cleanup once this old: longer than any upload takes.
STORED_ORPHAN_GRACE_MINUTES = env_number("STORED_ORPHAN_GRACE_MINUTES", 60)

# --- Resumable uploads (SPEC §11.5) -----------------------------------------------------------
MAX_RESUMABLE_UPLOAD_SIZE = int(env_number("MAX_RESUMABLE_UPLOAD_SIZE", 5 * 1024**3))
# Hours after its last byte an upload not attached expires (cleanup kind `uploads`).
UPLOAD_EXPIRY_HOURS = env_number("UPLOAD_EXPIRY_HOURS", 24)
# Uploads one user may hold open at once (neither attached nor expired); one more is 429
# `too_many_uploads`. Each holds a row and a file until it expires, whatever its size.
UPLOAD_MAX_OPEN_PER_USER = int(env_number("UPLOAD_MAX_OPEN_PER_USER", 1000))
# Seconds an append claim lasts without news from its writer (a killed web process's claim
# lapses after this); a writer renews it at every checkpoint.
UPLOAD_WRITE_LEASE_SECONDS = env_number("UPLOAD_WRITE_LEASE_SECONDS", 60)
# Bytes between two checkpoints of an append (fsync, then the offset and digest state saved).
UPLOAD_CHECKPOINT_BYTES = int(env_number("UPLOAD_CHECKPOINT_BYTES", 16 * 1024 * 1024))
# Bytes of each S3 multipart part of a resumable upload but the last (S3's minimum, 5 MiB, if
# lower); each part's bytes wait in a local tail file of their own until S3 took the part.
UPLOAD_S3_PART_SIZE = int(env_number("UPLOAD_S3_PART_SIZE", 16 * 1024 * 1024))
UPLOAD_URL_NAMES += ["upload-list", "upload-detail"]

# --- Benchmarks (SPEC §11.1) -------------------------------------------------------------------
# Bytes of one challenge bundle (a multipart body is bounded by MAX_REQUEST_BODY_SIZE as well),
# and of its members once unpacked (a zip bomb is refused from its central directory).
MAX_BUNDLE_SIZE = int(env_number("MAX_BUNDLE_SIZE", 5 * 1024**3))
MAX_BUNDLE_UNPACKED_SIZE = int(env_number("MAX_BUNDLE_UNPACKED_SIZE", 20 * 1024**3))

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
# Where a worker keeps the bundle folders a phase's stages read (scoring program, reference and
# input data), extracted once per digest; "" is a folder in the system's temporary folder.
GRADING_BUNDLE_CACHE = env.str("GRADING_BUNDLE_CACHE", default="")
GRADING_BUNDLE_CACHE_SIZE = int(env_number("GRADING_BUNDLE_CACHE_SIZE", 10 * 1024**3))
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
# Who makes a fired plan's attempt: "watcher" (a pool of the watcher's own threads, so plans
# never wait behind gradings in the task queue) or "queue" (django-q2 workers).
PLAN_DELIVERY = env.str("PLAN_DELIVERY", default="watcher")
if PLAN_DELIVERY not in ("watcher", "queue"):
    raise ImproperlyConfigured('PLAN_DELIVERY must be "watcher" or "queue".')
# Threads of each watcher's pool: attempts mostly wait on the network, so a few per core.
PLAN_DELIVERY_THREADS = int(env_number("PLAN_DELIVERY_THREADS", 8))
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
# (grading), or the broker re-delivers a task that is still running. A phase submission runs two
# stages, each up to GRADING_TIMEOUT.
Q_TIMEOUT = int(env_number("Q_TIMEOUT", max(2 * GRADING_TIMEOUT + 60, 120)))
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

# --- Rescoring (SPEC §11.6) -------------------------------------------------------------------
# Work chains per rescore: at most this many workers score old submissions in a new scoring
# version at once (docs/decisions.md: new submissions share the queue and keep a worker).
RESCORE_WORKERS = int(env_number("RESCORE_WORKERS", 1))
# Items one rescore task scores in a row while no job is queued for a worker (then it hands
# its chain on to a new task): fewer task round trips, new submissions still wait one item.
RESCORE_BATCH = int(env_number("RESCORE_BATCH", 20))
# A chain records an item on a thread of its own while it scores the next one (the database's
# waits off the sandbox's path); off: it records each item before taking the next.
RESCORE_OVERLAP = env.bool("RESCORE_OVERLAP", default=True)
