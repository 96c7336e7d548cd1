"""Writes to submissions, one module per concern:

- `transitions` — a status change outside the lease (`submission_transition`: score and
  reason only) and the job submission's raw-SQL seal (`submission_seal_ready`);
- `drafts` — a draft and its files (`submission_create`, `submission_file_add`);
- `leases` — the grading lease: the only writer of `lease_token`, `lease_expires_at` and
  `attempts` (take, take over, renew, release, end, exhausted, cancel, reset);
- `storage` — stored objects, the storage limit (`storage_admit`), deletion and the cleanup
  kinds `drafts` and `orphan_files`.

Callers import from the module that holds the function.
"""
