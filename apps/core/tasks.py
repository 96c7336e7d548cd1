"""django-q2 tasks of the platform core."""

from __future__ import annotations

import logging

from apps.core.cleanup import cleanup_run

logger = logging.getLogger(__name__)


def cleanup_periodic() -> dict[str, int]:
    """Run every cleanup kind; idempotent, so a duplicate delivery removes nothing twice."""
    reports = cleanup_run()
    summary = {report.kind: report.count for report in reports}
    logger.info("cleanup: %s", summary)
    return summary
