"""Cleanup kind `reservations`: reservations whose expiry has passed, whatever their state."""

from __future__ import annotations

import datetime as dt

from apps.core.cleanup import CleanupReport, register_cleanup
from apps.quotas.metrics import reservation_counted
from apps.quotas.models import Reservation


@register_cleanup("reservations", "quota reservations past their expiry (any state)")
def reservations_cleanup(*, now: dt.datetime, dry_run: bool) -> CleanupReport:
    """Past `expires_at` a reservation never counts again (expired, or consumed/released
    earlier), so removing it changes no decision."""
    stale = Reservation.objects.filter(expires_at__lte=now)
    items = list(stale.values_list("id", flat=True))
    if not dry_run:
        # The ones neither consumed nor released ended by expiring: counted now, as they go.
        expired = Reservation.objects.filter(
            pk__in=items, consumed_at__isnull=True, released_at__isnull=True
        ).count()
        Reservation.objects.filter(pk__in=items, expires_at__lte=now).delete()
        reservation_counted(state="expired", count=expired)
    return CleanupReport(kind="reservations", count=len(items), items=items)
