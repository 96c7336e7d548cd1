"""Cleanup kind `keys`: expired idempotency keys and claims left by requests that died."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db.models import Q

from apps.core.cleanup import CleanupReport, register_cleanup
from apps.jobs.models import IdempotencyKey


@register_cleanup("keys", "idempotency keys past their TTL, and dead claims")
def keys_cleanup(*, now: dt.datetime, dry_run: bool) -> CleanupReport:
    """An expired key is ignored at lookup; a claim older than the lock timeout would be taken
    over by the next request. Removing either changes no answer. A dead request that wakes up
    after its claim was removed cannot bind the key (its token is gone) and rolls back."""
    lock_timeout = dt.timedelta(seconds=float(settings.IDEMPOTENCY_LOCK_TIMEOUT))
    stale_q = Q(expires_at__lte=now) | Q(job__isnull=True, locked_at__lte=now - lock_timeout)
    stale = IdempotencyKey.objects.filter(stale_q)
    rows = list(stale.values_list("pk", "user_id", "key"))
    if not dry_run:
        IdempotencyKey.objects.filter(stale_q, pk__in=[pk for pk, _, _ in rows]).delete()
    items = [f"user {user_id}: {key}" for _, user_id, key in rows]
    return CleanupReport(kind="keys", count=len(items), items=items)
