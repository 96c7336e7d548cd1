"""The invariants and the figures, read after the drain."""

from __future__ import annotations

import collections
import statistics
import time
from typing import Any

from bench.chaoslib.base import ChaosBase
from bench.chaoslib.common import BUCKET, CONCURRENT_LIMIT, FAULT_KINDS, percentile
from bench.chaoslib.receivers import Delivery
from bench.chaoslib.state import Fault

# Faults that can stop a sent request's outcome from being recorded.
RECORD_FAULTS = ("watcher_kill", "watcher_stop", "worker_kill", "pg_restart")


class Checks:
    """The invariants, from the database, the bucket and the receivers' log."""

    def __init__(self, chaos: ChaosBase) -> None:
        self.chaos = chaos
        self.state = chaos.state

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with self.chaos.servers.run_conn() as conn:
            return conn.execute(sql, params).fetchall()

    def run(self) -> tuple[list[tuple[str, int, list[str]]], list[tuple[str, str]]]:
        rows = [
            self.keys(),
            self.concurrency(),
            self.graded_once(),
            self.stuck(),
            *self.plans(),
            self.store(),
            *self.answers(),
            self.created_count(),
            self.reviewed_once(),
        ]
        return rows, self.figures()

    def keys(self) -> tuple[str, int, list[str]]:
        bad = [
            f"user {user} key {key}: jobs {', '.join(sorted(jobs))}"
            for (user, key), jobs in self.state.key_jobs.items()
            if len(jobs) > 1
        ]
        db = self.query(
            "SELECT user_id, key, count(DISTINCT job_id) FROM jobs_idempotencykey "
            "GROUP BY user_id, key HAVING count(DISTINCT job_id) > 1"
        )
        bad += [f"database: user {u} key {k} bound to {n} jobs" for u, k, n in db]
        checked = len(self.state.key_jobs)
        return "no idempotency key bound to two jobs", checked, bad

    def concurrency(self) -> tuple[str, int, list[str]]:
        return (
            f"no user over max_concurrent_jobs={CONCURRENT_LIMIT} (sampled)",
            self.state.samples,
            list(self.state.over_limit),
        )

    def graded_once(self) -> tuple[str, int, list[str]]:
        jobs = self.query(
            "SELECT j.id, j.status, j.finished_at IS NOT NULL, "
            "count(a.id) FILTER (WHERE a.outcome IN ('completed', 'review_pending', 'failed')), "
            "min(a.outcome) FILTER (WHERE a.outcome IN ('completed', 'review_pending', 'failed')) "
            "FROM jobs_job j LEFT JOIN grading_gradingattempt a ON a.job_id = j.id "
            "GROUP BY j.id, j.status, j.finished_at"
        )
        bad: list[str] = []
        for job_id, status, finished, results, outcome in jobs:
            if results != 1:
                bad.append(f"job {job_id} ({status}): {results} successful grading attempts")
            elif not finished:
                bad.append(f"job {job_id}: result recorded but the job is {status}")
            elif (status == "failed") != (outcome == "failed"):
                bad.append(f"job {job_id} is {status} but its grading was {outcome}")
        known = {row[0] for row in jobs}
        bad += [
            f"accepted job {j} is not in the database" for j in self.state.accepted_jobs - known
        ]
        return "every accepted job graded exactly once", len(jobs), bad

    def stuck(self) -> tuple[str, int, list[str]]:
        jobs = self.query("SELECT id, status FROM jobs_job")
        subs = self.query(
            "SELECT id, status FROM submissions_submission "
            "WHERE status IN ('pending', 'processing')"
        )
        bad = [f"job {j} still {s}" for j, s in jobs if s in ("queued", "running")]
        bad += [f"submission {i} still {s}" for i, s in subs]
        return "no job stuck queued/running after the drain", len(jobs), bad

    def plans(self) -> list[tuple[str, int, list[str]]]:
        plans = self.query(
            "SELECT l.life_uuid, p.kind, p.state, p.webhook_id, "
            "(SELECT count(*) FROM schedule_planattempt a WHERE a.plan_id = p.id) "
            "FROM schedule_plan p JOIN schedule_life l ON l.id = p.life_id"
        )
        deliveries = list(self.chaos.receivers.deliveries)
        by_plan: dict[tuple[str, str], list[Delivery]] = collections.defaultdict(list)
        for d in deliveries:
            by_plan[(d.life_uuid, d.plan)].append(d)
        once: list[str] = []
        lost: list[str] = []
        booked = dict(self.state.lives)
        seen_lives = {row[0] for row in plans}
        lost += [
            f"life {u} booked ({s}) but not in the database"
            for u, s in booked.items()
            if u not in seen_lives
        ]
        for life_uuid, kind, state, webhook_id, attempts in plans:
            got = by_plan.get((life_uuid, kind), [])
            ids = {d.webhook_id for d in got}
            if ids - {webhook_id}:
                once.append(f"{life_uuid}/{kind}: delivered under webhook-ids {sorted(ids)}")
            # At least once: a request whose outcome a fault kept from being recorded is
            # sent again under the same webhook-id. Only those repeats are excused.
            resent = self.resent_after_fault(got, int(attempts))
            successes = [d for d in got if 200 <= d.status < 300]
            if len(successes) - resent > 1:
                once.append(f"{life_uuid}/{kind}: {len(successes)} successful deliveries")
            scenario = booked.get(life_uuid, "")
            if scenario == "point-down":
                if state != "Failed" or not got:
                    lost.append(f"{life_uuid}/{kind} (failing receiver): {state}, {len(got)} tries")
                elif len(got) - resent != 3 or int(attempts) != 3:
                    lost.append(
                        f"{life_uuid}/{kind}: {len(got)} attempts on a failing receiver, "
                        f"{attempts} recorded"
                    )
            elif state != "Done" or not successes:
                lost.append(f"{life_uuid}/{kind}: {state}, {len(successes)} successful deliveries")
        return [
            ("every plan fired once per webhook-id", len(plans), once),
            ("no plan lost (each fired, final state agrees)", len(plans), lost),
            (
                "every delivery signed (Standard Webhooks)",
                len(deliveries),
                [
                    f"{d.life_uuid}/{d.plan}: bad signature"
                    for d in deliveries
                    if not d.signature_ok
                ],
            ),
        ]

    def resent_after_fault(self, got: list[Delivery], recorded: int) -> int:
        """How many of a plan's deliveries are repeats the contract allows: deliveries beyond
        its recorded attempts, each sent while a fault could stop its outcome being recorded
        (a delivering process killed or stopped around it, or PostgreSQL down past the
        delivery's wait for it). Any other repeat stays a violation."""
        extra = len(got) - recorded
        if extra <= 0:
            return 0
        windows = [
            (f.at - 5.0, (f.recovered_at or f.at) + (40.0 if f.kind == "pg_restart" else 5.0))
            for f in self.state.faults
            if f.kind in RECORD_FAULTS
        ]
        if self.state.pg_window is not None:
            windows.append((self.state.pg_window[0], self.state.pg_window[1] + 40.0))
        in_window = sum(1 for d in got if any(lo <= d.at <= hi for lo, hi in windows))
        return min(extra, in_window)

    def store(self) -> tuple[str, int, list[str]]:
        names = {
            row[0] for row in self.query("SELECT storage_name FROM submissions_submissionfile")
        }
        objects: set[str] = set()
        paginator = self.chaos.s3().get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=BUCKET):
            objects.update(item["Key"] for item in page.get("Contents", []))
        bad = [f"orphan object {key}" for key in sorted(objects - names)]
        bad += [f"lost file {name}" for name in sorted(names - objects)]
        return (
            "every object referenced (after the sweep), every file present",
            len(names | objects),
            bad,
        )

    def answers(self) -> list[tuple[str, int, list[str]]]:
        answers = list(self.state.answers)
        window = self.state.pg_window
        outside: list[str] = []
        shape: list[str] = []
        for a in answers:
            if a.status < 500:
                continue
            stamp = time.strftime("%H:%M:%S", time.localtime(a.at))
            if not a.json_error_body:
                shape.append(f"{stamp} {a.status} {a.path}: not the JSON error body")
            inside = window is not None and window[0] <= a.at <= window[1]
            if not inside:
                outside.append(f"{stamp} {a.status} {a.path}")
            elif a.status != 503:
                shape.append(f"{stamp} {a.status} {a.path} during the PostgreSQL restart")
        return [
            ("no 5xx outside the PostgreSQL restart", len(answers), outside),
            ("every 5xx is 503 with the JSON error body", len(answers), shape),
        ]

    def created_count(self) -> tuple[str, int, list[str]]:
        server = self.query("SELECT count(*) FROM jobs_job")[0][0]
        client = len(self.state.created_jobs)
        bad = [] if server == client else [f"client created {client}, server has {server}"]
        return "client's created jobs = server's jobs", int(server), bad

    def reviewed_once(self) -> tuple[str, int, list[str]]:
        rows = self.query(
            "SELECT submission_id, count(*) FROM review_reviewrecord GROUP BY submission_id"
        )
        bad = [f"submission {s} reviewed {n} times" for s, n in rows if n > 1]
        return "no submission reviewed twice", len(rows), bad

    def watcher_recovery(self, fault: Fault) -> None:
        """When the last plan the watcher had armed at the fault made its first attempt, or,
        for a plan due later than the fault, how late it was: recovered = fault + the worst."""
        if not fault.plans:
            fault.recovered_at = fault.at
            return
        rows = self.query(
            "SELECT extract(epoch FROM p.time), extract(epoch FROM min(a.started_at)) "
            "FROM schedule_plan p LEFT JOIN schedule_planattempt a ON a.plan_id = p.id "
            "WHERE p.id = ANY(%s) GROUP BY p.id, p.time",
            fault.plans,
        )
        if any(started is None for _, started in rows):
            return
        worst = max(float(started) - max(float(due), fault.at) for due, started in rows)
        fault.recovered_at = fault.at + max(0.0, worst)

    def figures(self) -> list[tuple[str, str]]:
        chaos = self.chaos
        seconds = max(1.0, chaos.load_ended - chaos.load_started)
        answers = [a for a in self.state.answers if a.at <= chaos.load_ended]
        gradings = self.query(
            "SELECT count(*) FROM grading_gradingattempt "
            "WHERE outcome IN ('completed', 'review_pending', 'failed')"
        )[0][0]
        lateness = [
            float(row[0])
            for row in self.query(
                "SELECT extract(epoch FROM a.started_at - p.time) * 1000 "
                "FROM schedule_planattempt a JOIN schedule_plan p ON p.id = a.plan_id "
                "WHERE a.number = 1"
            )
        ]
        redone = self.query(
            "SELECT count(*) FROM grading_gradingattempt "
            "WHERE outcome IN ('abandoned', 'lease_lost')"
        )[0][0]
        figures = [
            ("load", f"{seconds:.0f} s, {len(chaos.state.accepted_jobs)} jobs accepted"),
            ("requests/s", f"{len(answers) / seconds:.1f} ({len(answers)} requests)"),
            ("gradings/s", f"{gradings / seconds:.2f} ({gradings} gradings, {redone} re-run)"),
            (
                "plan lateness p50 / p99",
                f"{percentile(lateness, 50):.0f} / {percentile(lateness, 99):.0f} ms "
                f"({len(lateness)} plans)",
            ),
            ("reviews completed", str(self.state.reviews_done)),
            ("orphan uploads swept at the end", self.state.orphans_swept or "none"),
        ]
        by_kind: dict[str, list[Fault]] = collections.defaultdict(list)
        for fault in self.state.faults:
            by_kind[fault.kind].append(fault)
        for fault in self.state.faults:
            if fault.kind.startswith("watcher_"):
                self.watcher_recovery(fault)
        for kind in [*FAULT_KINDS, "pg_restart"]:
            faults = by_kind.get(kind, [])
            times = [f.recovered_at - f.at for f in faults if f.recovered_at is not None]
            missing = len(faults) - len(times)
            text = f"{len(faults)} injected"
            if times:
                median = statistics.median(times)
                text += f", recovered in median {median:.1f} s, max {max(times):.1f} s"
            if missing:
                text += f", {missing} not recovered"
            figures.append((f"recovery: {kind}", text))
        errors = ", ".join(f"{k} {n}" for k, n in self.state.load_errors.most_common(8))
        figures.append(("client errors seen (retried)", errors or "none"))
        return figures
