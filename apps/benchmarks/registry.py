"""Registrations of the benchmarks app (imported from `BenchmarksConfig.ready()`): what the
apps below it call through their registries without importing this app."""

from __future__ import annotations

from apps.benchmarks.services.phase_submissions import (
    phase_admission_check,
    phase_submission_context,
)
from apps.benchmarks.services.refunds import entry_refund_on_cancel, entry_refund_on_fault
from apps.benchmarks.services.scoring import EntryPhaseProvider
from apps.benchmarks.services.storage import KIND as ORPHAN_BUNDLES
from apps.benchmarks.services.storage import stored_bundles_cleanup
from apps.core.cleanup import register_cleanup
from apps.core.queue import PHASES_REVEAL_OVERDUE, RESCORES_REAP
from apps.core.schedules import PeriodicTask, register_periodic_task
from apps.grading.fault_hooks import register_platform_fault_hook
from apps.grading.phases import phase_provider_register
from apps.jobs.admission_checks import register_admission_check
from apps.jobs.cancel_hooks import register_job_cancelled_hook
from apps.submissions.contexts import register_context_resolver
from apps.submissions.models import SubmissionKind

# Phase submissions (SPEC §11.2): `challenge`/`phase` on POST /api/submissions/, and the
# phase's check at enqueue (before the user's quotas; §11.4's team limits come after it).
register_context_resolver(phase_submission_context)
register_admission_check(
    "benchmarks.phase_open", kinds=(SubmissionKind.PREDICTIONS, SubmissionKind.CODE)
)(phase_admission_check)

# Phase submissions are graded in two stages and their scores written with the result.
phase_provider_register(EntryPhaseProvider())

# The reveal's safety net: a phase whose reveal time passed long ago is revealed.
register_periodic_task(
    PeriodicTask(name="yoyaku.benchmarks.reveal_overdue", func=PHASES_REVEAL_OVERDUE, minutes=1)
)

# Rescores whose work chains were lost (a cluster that died on the Redis broker) start again.
register_periodic_task(
    PeriodicTask(name="yoyaku.benchmarks.rescores_reap", func=RESCORES_REAP, minutes=1)
)

register_cleanup(
    ORPHAN_BUNDLES,
    "stored bundles no challenge or scoring version names (a web process killed mid-apply), "
    "older than STORED_ORPHAN_GRACE_MINUTES",
)(stored_bundles_cleanup)

# Refunds (SPEC §11.4): a job cancelled before grading started, a worker lost past
# GRADING_MAX_ATTEMPTS; a scorer's failure is refunded with the result (services/scoring.py).
register_job_cancelled_hook("benchmarks.refund")(entry_refund_on_cancel)
register_platform_fault_hook("benchmarks.refund")(entry_refund_on_fault)
