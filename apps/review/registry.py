"""Registrations of the review app (imported from `ReviewConfig.ready()`): the cleanup kind
`claims`."""

from __future__ import annotations

from apps.core.cleanup import register_cleanup
from apps.review.services import review_claims_purge

register_cleanup("claims", "Review claims that expired or whose submission left review")(
    review_claims_purge
)
