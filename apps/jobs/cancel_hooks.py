"""What other apps do when a job is cancelled, without this app importing them.

`job_cancel` calls every registered hook inside its transaction, after the job became
`cancelled` (the submission and job rows locked), with whether grading had started (the job
was `running`; a `queued` job's program never ran). A hook may write rows of its own app;
they commit with the cancel or not at all.
"""

from __future__ import annotations

from collections.abc import Callable

from apps.core.hooks import Hook, NamedHooks

JobCancelledHook = Hook

_hooks = NamedHooks()


def register_job_cancelled_hook(name: str) -> Callable[[JobCancelledHook], JobCancelledHook]:
    """Decorator: call `hook(submission_id=..., started=...)` for every cancelled job.
    Registering a name again replaces its hook."""
    return _hooks.register(name)


def job_cancelled_hooks_run(*, submission_id: str, started: bool) -> None:
    _hooks.run(submission_id=submission_id, started=started)
