"""Registrations of the jobs app (imported from `JobsConfig.ready()`): the cleanup kind `keys`."""

from __future__ import annotations

from apps.core.cleanup import register_cleanup
from apps.jobs.services import idempotency_keys_purge

register_cleanup("keys", "idempotency keys past their TTL, and dead claims")(idempotency_keys_purge)
