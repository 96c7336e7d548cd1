"""The production settings plus a baseline endpoint, for bench/submit.py only."""

import os

os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
os.environ.setdefault(
    "SCHEDULE_WEBHOOK_SECRET", "whsec_YmVuY2gtb25seS15b3lha3Utd2ViaG9vay1zZWNyZXQ="
)

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.submit_support.urls"

# Refusals (409/429) are the point of the races; do not log each one.
LOGGING["loggers"]["django.request"] = {"level": "ERROR"}  # type: ignore[index]  # noqa: F405
# The benchmark serves no static files (and never runs collectstatic).
STATIC_ROOT = None  # type: ignore[assignment]
