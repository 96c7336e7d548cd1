"""The load, through the SDK: users, reviewers, bookings and the usage sampler."""

from __future__ import annotations

import datetime as dt
import random
import threading
import time
from typing import Any

import psycopg

from bench.chaoslib.base import ChaosBase
from bench.chaoslib.common import CONCURRENT_LIMIT
from yoyaku_client import Client
from yoyaku_client.client import Action
from yoyaku_client.errors import ApiError, QuotaError, YoyakuError

PROGRAM = """import json, sys, time
time.sleep({sleep})
print("graded", {score})
with open("metrics.json", "w") as handle:
    json.dump({{"score": {score}}}, handle)
"""


class ChaosLoad(ChaosBase):
    """The load's threads: users, reviewers, bookings and the usage sampler."""

    def user_loop(self, user: str, index: int) -> None:
        rng = random.Random(f"{self.seed}-{user}-{index}")
        folder = self.run_dir / f"files-{user}-{index}"
        folder.mkdir()
        number = 0
        with self.client(user) as client:
            while not self.state.stop_load.is_set():
                number += 1
                score = 150 if rng.random() < 0.15 else rng.randint(1, 99)
                (folder / "main.py").write_text(
                    PROGRAM.format(sleep=round(rng.uniform(2.0, 5.0), 1), score=score)
                )
                (folder / "config.yaml").write_text(f"name: {user}-{index}-{number}\n")
                (folder / "helper.py").write_text(
                    f"VALUE = {number}\n" + "#" * rng.randint(0, 4000)
                )
                try:
                    submission = client.create_submission(
                        [folder / "main.py", folder / "config.yaml"]
                    )
                    client.upload_file(submission.submission_id, folder / "helper.py")
                except YoyakuError as exc:
                    self.count_error("upload", exc)
                    time.sleep(0.5)
                    continue
                key = f"{user}-{index}-{number}"
                shared = rng.random() < 0.3
                self.submit_until_answered(client, user, key, submission.submission_id, shared)

    def submit_until_answered(
        self, client: Client, user: str, key: str, submission_id: str, shared: bool
    ) -> None:
        """Submit with one key until the server names a job; on a quota refusal wait for a slot
        (the same key again). After the load stopped, a refused submission is given up (its
        draft stays a draft), but a request that may have created a job is never abandoned."""
        while True:
            results: list[str] = []
            errors: list[BaseException] = []

            def one(
                target: Client,
                results: list[str] = results,
                errors: list[BaseException] = errors,
            ) -> None:
                try:
                    answer = target.submit_job(submission_id, idempotency_key=key)
                    results.append(answer.job_id)
                    if not answer.idempotent_hit:
                        with self.state.lock:
                            self.state.created_jobs.add(answer.job_id)
                except BaseException as failure:
                    errors.append(failure)

            if shared:
                with self.client(user) as twin:
                    racer = threading.Thread(target=one, args=(twin,))
                    racer.start()
                    one(client)
                    racer.join()
            else:
                one(client)
            with self.state.lock:
                self.state.key_jobs[(user, key)].update(results)
                self.state.accepted_jobs.update(results)
            if results:
                return
            quota = all(isinstance(exc, QuotaError) for exc in errors)
            for exc in errors:
                self.count_error("submit", exc)
            if quota and self.state.stop_load.is_set():
                return
            time.sleep(0.5 if quota else 1.0)

    def count_error(self, where: str, exc: BaseException) -> None:
        code = exc.code if isinstance(exc, ApiError) else type(exc).__name__
        with self.state.lock:
            self.state.load_errors[f"{where}:{code}"] += 1

    def reviewer_loop(self, reviewer: str) -> None:
        rng = random.Random(f"{self.seed}-{reviewer}")
        with self.client(reviewer) as client:
            while not self.state.stop_load.is_set():
                try:
                    queue = client.review_queue(limit=10)
                except YoyakuError as exc:
                    self.count_error("review", exc)
                    time.sleep(1)
                    continue
                for entry in queue:
                    if entry.claimed_by is not None:
                        continue
                    try:
                        client.claim_review(entry.submission_id)
                        time.sleep(rng.uniform(0.1, 0.5))
                        client.complete_review(entry.submission_id, verdict="approve", score=50)
                        with self.state.lock:
                            self.state.reviews_done += 1
                    except YoyakuError as exc:
                        self.count_error("review", exc)
                time.sleep(rng.uniform(0.5, 1.5))

    def booking_loop(self, user: str, last_booking: float) -> None:
        rng = random.Random(f"{self.seed}-{user}-bookings")
        base = {name: f"http://127.0.0.1:{port}/hook" for name, port in self.receiver_ports.items()}
        with self.client(user) as client:
            while not self.state.stop_load.is_set() and time.time() < last_booking:
                scenario = rng.choice(["point-ok", "point-flaky", "point-down", "term"])
                now = dt.datetime.now(dt.UTC)
                birth = now + dt.timedelta(seconds=rng.uniform(10, 40))
                life_uuid = f"{rng.getrandbits(128):032x}"

                def action(target: str, life: str = life_uuid) -> Action:
                    return Action(
                        path=target,
                        body={"life": life},
                        retry_count=2,
                        retry_interval=1,
                        request_timeout=5,
                    )

                for _ in range(20):
                    try:
                        if scenario == "term":
                            client.book_term(
                                birth_time=birth,
                                death_time=birth + dt.timedelta(seconds=rng.uniform(16, 30)),
                                birth=action(base["ok"]),
                                death=action(base["flaky"]),
                                life_uuid=life_uuid,
                            )
                        else:
                            target = base[scenario.removeprefix("point-")]
                            client.book_point(
                                at=birth,
                                action=action(target),
                                life_uuid=life_uuid,
                            )
                        with self.state.lock:
                            self.state.lives[life_uuid] = scenario
                        break
                    except ApiError as exc:
                        self.count_error("book", exc)
                        if exc.code == "too_late":
                            break
                        time.sleep(1)
                    except YoyakuError as exc:
                        self.count_error("book", exc)
                        time.sleep(1)
                time.sleep(rng.uniform(1.0, 3.0))

    def sampler_loop(self) -> None:
        """Every user's usage (active reservations + queued/running jobs), twice a second, in
        one statement (one snapshot)."""
        sql = """
            SELECT u.username,
                   (SELECT count(*) FROM jobs_job j
                     WHERE j.owner_id = u.id AND j.status IN ('queued', 'running'))
                 + (SELECT count(*) FROM quotas_reservation r
                     WHERE r.user_id = u.id AND r.consumed_at IS NULL
                       AND r.released_at IS NULL AND r.expires_at > now())
            FROM auth_user u WHERE u.username LIKE 'chaos-user-%%'
        """
        conn: psycopg.Connection[Any] | None = None
        while not self.state.stop_load.is_set():
            try:
                if conn is None or conn.closed:
                    conn = self.servers.run_conn()
                rows = conn.execute(sql).fetchall()
                with self.state.lock:
                    self.state.samples += len(rows)
                    self.state.over_limit.extend(
                        f"{name}: {usage} > {CONCURRENT_LIMIT}"
                        for name, usage in rows
                        if usage > CONCURRENT_LIMIT
                    )
            except psycopg.Error:
                conn = None
            time.sleep(0.5)
        if conn is not None:
            conn.close()
