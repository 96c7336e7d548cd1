"""Keeping a code phase's predictions (SPEC §11.6): what the run stage left in `/output` is
stored as a `.tar.gz` under the plan's `keep_predictions_under` folder of Django's default
storage, so that a later scoring version runs stage 2 again on exactly those predictions and
never reruns the participant's program.

Each attempt stores under a fresh name; the result (under the lease) records which one is the
submission's, so a lost attempt's archive is never the one scored.
"""

from __future__ import annotations

import logging
import secrets
import tarfile
import tempfile
from pathlib import Path

from django.core.files import File
from django.core.files.storage import default_storage

from apps.grading.phases import ScoringPlan

logger = logging.getLogger(__name__)

KEPT_FILENAME = "predictions.tar.gz"


def _regular(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """Folders and regular files only (the collected folder holds nothing else)."""
    return member if member.isfile() or member.isdir() else None


def predictions_keep(plan: ScoringPlan, folder: Path) -> str:
    """Store `folder`'s files when the plan asks for it; the stored name, or "" (not asked,
    or the store failed: logged, and a rescore of this submission then fails for hosts)."""
    if not plan.keep_predictions_under:
        return ""
    try:
        with tempfile.TemporaryFile() as spool:
            with tarfile.open(fileobj=spool, mode="w:gz") as archive:
                for child in sorted(folder.iterdir()):
                    archive.add(child, arcname=child.name, filter=_regular)
            spool.seek(0)
            name = f"{plan.keep_predictions_under.rstrip('/')}/{secrets.token_hex(8)}.tar.gz"
            return default_storage.save(name, File(spool, name=KEPT_FILENAME))
    except OSError:
        logger.exception("grading: the predictions could not be kept")
        return ""
