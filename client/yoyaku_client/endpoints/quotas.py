"""`/api/quotas/`: your limits and concurrent-job reservations."""

from __future__ import annotations

from typing import TYPE_CHECKING

from yoyaku_client import models
from yoyaku_client.endpoints.base import ApiBase
from yoyaku_client.models import Reservation
from yoyaku_client.transport import Safety

if TYPE_CHECKING:
    from yoyaku_client.models import Quota


class QuotasApi(ApiBase):
    """Limits, usage and reservations."""

    def quota(self) -> Quota:
        """`GET /api/quotas/me/`: limits and usage."""
        return models.Quota.from_api(self._json("GET", "/quotas/me/"))

    def list_reservations(self) -> list[Reservation]:
        """`GET /api/quotas/reservations/`: yours, with their state now."""
        return [Reservation.from_api(r) for r in self._json("GET", "/quotas/reservations/")]

    def reserve(self, *, ttl_seconds: int | None = None) -> Reservation:
        """`POST /api/quotas/reservations/`: hold a concurrent-job slot.

        Not repeated after a lost answer (`AmbiguousRequestError`): a second reservation
        would hold a second slot until it expires.
        """
        body = {} if ttl_seconds is None else {"ttl_seconds": ttl_seconds}
        data = self._json("POST", "/quotas/reservations/", json=body, safety=Safety.UNSAFE)
        return Reservation.from_api(data)

    def release_reservation(self, reservation_id: str) -> Reservation:
        """`POST .../release/`; releasing twice is fine."""
        path = f"/quotas/reservations/{reservation_id}/release/"
        return Reservation.from_api(self._json("POST", path, json={}))

    def extend_reservation(
        self, reservation_id: str, *, ttl_seconds: int | None = None
    ) -> Reservation:
        """`POST .../extend/`: expiry = now + ttl (only while active)."""
        body = {} if ttl_seconds is None else {"ttl_seconds": ttl_seconds}
        path = f"/quotas/reservations/{reservation_id}/extend/"
        return Reservation.from_api(self._json("POST", path, json=body))
