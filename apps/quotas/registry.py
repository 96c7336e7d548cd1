"""Registrations of the quotas app (imported from `QuotasConfig.ready()`): the cleanup kind
`reservations`."""

from __future__ import annotations

from apps.core.cleanup import register_cleanup
from apps.quotas.services import reservations_purge

register_cleanup("reservations", "quota reservations past their expiry (any state)")(
    reservations_purge
)
