"""Registrations of the submissions app (imported from `SubmissionsConfig.ready()`): the
cleanup kind `drafts`."""

from __future__ import annotations

from apps.core.cleanup import register_cleanup
from apps.submissions.services import submission_drafts_cleanup

register_cleanup(
    "drafts",
    "draft submissions older than SUBMISSION_DRAFT_TTL_DAYS, with their stored files",
)(submission_drafts_cleanup)
