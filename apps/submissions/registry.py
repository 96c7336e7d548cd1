"""Registrations of the submissions app (imported from `SubmissionsConfig.ready()`): the
cleanup kinds `drafts`, `orphan_files` and `uploads`."""

from __future__ import annotations

from apps.core.cleanup import register_cleanup
from apps.submissions.resumable.services import uploads_expired_cleanup
from apps.submissions.services.storage import stored_orphans_cleanup, submission_drafts_cleanup

register_cleanup(
    "drafts",
    "draft submissions older than SUBMISSION_DRAFT_TTL_DAYS, with their stored files",
)(submission_drafts_cleanup)

register_cleanup(
    "orphan_files",
    "stored uploads no file row names (a web process killed mid-upload), older than "
    "STORED_ORPHAN_GRACE_MINUTES",
)(stored_orphans_cleanup)

register_cleanup(
    "uploads",
    "resumable uploads not attached within UPLOAD_EXPIRY_HOURS of their last byte, with their "
    "bytes",
)(uploads_expired_cleanup)
