"""Writes of the schedule app: `booking` (book a Life, the booking rules), `lives` (change,
cancel, purge) and `plans` (every state change of a plan or a Life, the operator's retry).

Locks, in this order whenever several are taken: the resource row (`ScheduleResource`), the
user's quota row (`quotas.services.quota_policy_lock`, bookings only), the Life, its Plans (by
pk). On SQLite the IMMEDIATE transaction serializes all writers; on PostgreSQL the resource row
lock serializes bookings of one resource, and the exclusion constraint
`schedule_life_no_overlap` is the last line of defence.
"""
