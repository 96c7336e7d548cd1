"""What other apps do when a grading fails through the platform's fault rather than the
submitter's, without this app importing them.

Called inside the transaction that writes the failure: today when the worker was lost
`GRADING_MAX_ATTEMPTS` times (`WORKER_LOST`, from the lease's exhaustion). A scorer's
failure or a grader that could not run a phase submission reaches the phase provider as
`scoring_failed` with the result instead (`apps.grading.phases`).
"""

from __future__ import annotations

from collections.abc import Callable

from apps.core.hooks import Hook, NamedHooks

WORKER_LOST = "worker_lost"

PlatformFaultHook = Hook

_hooks = NamedHooks()


def register_platform_fault_hook(name: str) -> Callable[[PlatformFaultHook], PlatformFaultHook]:
    """Decorator: call `hook(submission_id=..., fault=...)` inside the failure's transaction.
    Registering a name again replaces its hook."""
    return _hooks.register(name)


def platform_fault_hooks_run(*, submission_id: str, fault: str) -> None:
    _hooks.run(submission_id=submission_id, fault=fault)
