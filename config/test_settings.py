"""Settings for the test suite: the production settings with test-only secrets filled in."""

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("SECRET_KEY", "test-only-secret-key")
os.environ.setdefault(
    "SCHEDULE_WEBHOOK_SECRET", "whsec_dGVzdC1vbmx5LXlveWFrdS13ZWJob29rLXNlY3JldA=="
)
# The suite's live servers speak plain HTTP on loopback (SPEC §10: loopback tests set these off).
os.environ.setdefault("SESSION_COOKIE_SECURE", "false")
os.environ.setdefault("CSRF_COOKIE_SECURE", "false")

# A fresh metrics folder per test session, shared with the processes the tests start (they
# inherit the variable); removed when the session ends. Each pytest-xdist worker makes its own
# rather than inherit the controller's, or its tests would count the other worker's processes.
# Other users of these settings (mypy's Django plugin, which ends without running exit
# handlers) get the settings' default folder.
if "pytest" in sys.modules and (
    "PROMETHEUS_MULTIPROC_DIR" not in os.environ or os.environ.get("PYTEST_XDIST_WORKER")
):
    _metrics_dir = tempfile.mkdtemp(prefix="yoyaku-test-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = _metrics_dir
    atexit.register(shutil.rmtree, _metrics_dir, ignore_errors=True)

from config.settings import *  # noqa: F403

# Under pytest-xdist each worker has its own test database (pytest-django suffixes its name) but
# all share the Redis database of REDIS_URL: a queue of their own per worker (django-q2 keys its
# queue and signs its tasks by the name), or one worker's cluster would take (and lose) another's
# tasks. The processes a test starts inherit the variable, so they use the same name.
if os.environ.get("PYTEST_XDIST_WORKER"):
    Q_CLUSTER = {**Q_CLUSTER, "name": f"{Q_CLUSTER['name']}-{os.environ['PYTEST_XDIST_WORKER']}"}  # noqa: F405

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
MEDIA_ROOT = Path(os.environ.get("TEST_MEDIA_ROOT", str(BASE_DIR / ".test-media")))  # noqa: F405
# Serve static files from the finders; the suite never runs collectstatic.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True

# Test-only fault switch (inert until a test arms it; see tests/faults.py). Production settings
# never list it.
MIDDLEWARE = [*MIDDLEWARE, "tests.faults.FaultInjectionMiddleware"]  # noqa: F405
PAGES_RETRY_BASE_DELAY_MS = 100
PAGES_POLL_INTERVAL_MS = 300
