"""Quota refusals (SPEC §3)."""

from __future__ import annotations

from http import HTTPStatus

from apps.core.exceptions import DomainError


class QuotaExceeded(DomainError):
    code = "quota_exceeded"
    http_status = HTTPStatus.TOO_MANY_REQUESTS
    default_message = "Quota exceeded."


class RateLimited(DomainError):
    """Carries a `Retry-After` header (seconds until the oldest job leaves the 24 h window)."""

    code = "rate_limited"
    http_status = HTTPStatus.TOO_MANY_REQUESTS
    default_message = "Rate limit exceeded."


class CostLimitExceeded(DomainError):
    code = "cost_limit_exceeded"
    http_status = HTTPStatus.TOO_MANY_REQUESTS
    default_message = "Cost limit exceeded."


class ReservationNotActive(DomainError):
    code = "reservation_not_active"
    http_status = HTTPStatus.CONFLICT
    default_message = "The reservation is not active."


class StorageQuotaExceeded(DomainError):
    """The user's stored submission bytes would pass their storage limit (SPEC §10)."""

    code = "storage_quota_exceeded"
    http_status = HTTPStatus.TOO_MANY_REQUESTS
    default_message = "Storage quota exceeded."
