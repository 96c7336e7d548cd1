"""Plan execution: `claims` (watchers arm plans under leases; late plans invalidated),
`executor` (a delivery starts an armed plan and runs it), `request` (the one signed HTTP
request of an attempt) and `outcome` (the attempt recorded, the plan and its Life moved on).

Exactly once: a watcher arms a plan by moving it Standby → Preset with a fresh `arm_token`
(claims take `SELECT ... FOR UPDATE SKIP LOCKED` on PostgreSQL, the IMMEDIATE transaction on
SQLite). A delivery runs the action only after the compare-and-set Preset(token) → Running
succeeds, so two deliveries of one arming (or a stale timer of an older arming) never both run.
"""
