"""bench/submit.py's phase run: job submissions to a benchmark phase with team limits against
the same number of plain submissions on the same server, and 64 clients racing one team's
`per_day` limit (the team has 3 members; the jobs admitted must equal the limit)."""

from __future__ import annotations

import hashlib
import os
import statistics
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from bench.submit_support.harness import CLIENTS, RACERS, ROOT, run_load, summarize

# The load's phase: limits that never bind. The race's phase: only `per_day` binds.
GENEROUS = {"per_day": 1_000_000, "total": 1_000_000, "concurrent": 1_000_000}
RACE_LIMIT = 5
RACE_SLUG = "digits-race"
PHASE_REQUESTS = int(os.environ.get("BENCH_PHASE_REQUESTS", "30"))
PHASE_ROUNDS = max(3, int(os.environ.get("BENCH_PHASE_ROUNDS", "5")))
BIG = {"max_concurrent_jobs": 1_000_000, "max_jobs_per_day": 1_000_000}


def _apply(host: Any, slug: str, limits: dict[str, int]) -> None:
    """The example bundle `digits`, as `slug`, its `dev` phase with exactly `limits`."""
    import sys

    sys.path.insert(0, str(ROOT))
    from apps.benchmarks.services.apply import challenge_apply
    from tests.benchmarks.bundles import bundle

    def change(document: dict[str, Any]) -> None:
        document["slug"] = slug
        for phase in document["phases"]:
            if phase["slug"] == "dev":
                phase["limits"] = dict(limits)

    data = bundle(change)
    path = Path(tempfile.mkdtemp(prefix="yoyaku-bench-bundle-")) / "bundle.zip"
    path.write_bytes(data)
    challenge_apply(user=host, bundle_path=path, sha256=hashlib.sha256(data).hexdigest())


def prepare_challenges() -> None:
    """A host applies `digits` (generous limits) and `digits-race` (`per_day` 5)."""
    from django.contrib.auth.models import Permission, User

    host = User.objects.create_user(username="bench-host")
    host.user_permissions.add(
        Permission.objects.get(content_type__app_label="benchmarks", codename="add_challenge")
    )
    host = User.objects.get(pk=host.pk)
    _apply(host, "digits", GENEROUS)
    _apply(host, RACE_SLUG, {"per_day": RACE_LIMIT, "concurrent": 1_000_000})


def _phase_drafts(user: Any, slug: str, count: int) -> list[str]:
    """`count` predictions submissions of `user` to phase `dev` of `slug` (the real service:
    the resolver's checks, the entry, the team of one the first time)."""
    from apps.submissions.services.drafts import submission_create
    from apps.submissions.uploads import IncomingFile

    ids = []
    for index in range(count):
        content = f"id,label\n0,{index % 10}\n".encode()
        upload = IncomingFile(raw_name="predictions.csv", content_type="text/csv", charset=None)
        try:
            upload.write(content)
            upload.seek(0)
            upload.size = len(content)
            upload.sha256 = hashlib.sha256(content).hexdigest()
            draft = submission_create(user=user, uploads=[upload], challenge=slug, phase="dev")
        finally:
            upload.close()
        ids.append(str(draft.pk))
    return ids


def _participant(prefix: str, slug: str) -> tuple[Any, str]:
    from django.contrib.auth.models import User

    from apps.benchmarks.services.participants import challenge_participate
    from apps.core.models_utils import new_hex_id
    from apps.core.services import token_create
    from apps.quotas.models import QuotaPolicy

    user = User.objects.create_user(username=f"{prefix}-{new_hex_id()[:8]}")
    QuotaPolicy.objects.create(user=user, **BIG)
    participant = challenge_participate(user=user, slug=slug)
    assert participant.status == "approved", participant.status
    return user, token_create(user=user, name="bench").token


def prepare_phase_users(count: int, per_user: int) -> list[tuple[Any, str, list[str]]]:
    users = []
    for i in range(count):
        user, token = _participant(f"phase{i}", "digits")
        users.append((user, token, _phase_drafts(user, "digits", per_user)))
    return users


def _jobs(
    users: list[tuple[Any, str, list[str]]], part: range, tag: str
) -> list[list[tuple[str, str, dict[str, Any]]]]:
    return [
        [
            ("/api/jobs/", token, {"submission_id": sids[i], "idempotency_key": f"{tag}-{sids[i]}"})
            for i in part
        ]
        for _, token, sids in users
    ]


def _spread(name: str, values: list[float], unit: str = "") -> str:
    return (
        f"{name} min {min(values):.2f}{unit} / median {statistics.median(values):.2f}{unit} / "
        f"max {max(values):.2f}{unit}"
    )


def run_phase_load(port: int) -> list[float]:
    """PHASE_ROUNDS rounds; each sends CLIENTS x PHASE_REQUESTS plain job submissions and as
    many to the phase (alternating which goes first). Prints and returns the per-round
    ratios phase / plain."""
    from django.db import connections

    from bench.submit_support.races import prepare_users

    per_user = PHASE_ROUNDS * PHASE_REQUESTS
    plain = prepare_users(CLIENTS, "plain", per_user, **BIG)
    phase = prepare_phase_users(CLIENTS, per_user)
    connections.close_all()
    plain_rates: list[float] = []
    phase_rates: list[float] = []
    ratios: list[float] = []
    for round_no in range(PHASE_ROUNDS):
        part = range(round_no * PHASE_REQUESTS, (round_no + 1) * PHASE_REQUESTS)
        loads = [("plain", _jobs(plain, part, "p")), ("phase", _jobs(phase, part, "f"))]
        if round_no % 2:
            loads.reverse()
        rates: dict[str, float] = {}
        for name, work in loads:
            elapsed, latencies, results = run_load(port, work)
            assert all(status == 201 for status, _ in results), Counter(
                (s, b.get("code")) for s, b in results
            )
            rates[name] = summarize(f"{name} r{round_no + 1}", elapsed, latencies)["rate"]
        plain_rates.append(rates["plain"])
        phase_rates.append(rates["phase"])
        ratios.append(rates["phase"] / rates["plain"])
    print(
        f"  phase run ({PHASE_ROUNDS} rounds x {CLIENTS} clients x {PHASE_REQUESTS} job "
        f"submissions each way, limits {GENEROUS}):",
        flush=True,
    )
    print("    " + _spread("plain req/s", plain_rates), flush=True)
    print("    " + _spread("phase req/s", phase_rates), flush=True)
    print("    " + _spread("ratio phase/plain", ratios) + " (target >= 0.90)", flush=True)
    return ratios


def _race_team(round_no: int) -> list[tuple[str, list[str]]]:
    """Three members of one new team of `digits-race`, with RACERS drafts spread over them."""
    from apps.benchmarks.services.teams import team_create, team_join

    members = [_participant(f"race{round_no}m{m}", RACE_SLUG) for m in range(3)]
    view = team_create(user=members[0][0], slug=RACE_SLUG, name=f"Racers {round_no}")
    for user, _ in members[1:]:
        team_join(user=user, slug=RACE_SLUG, invite_code=view.team.invite_code)
    shares = [len(range(m, RACERS, 3)) for m in range(3)]
    return [
        (token, _phase_drafts(user, RACE_SLUG, share))
        for (user, token), share in zip(members, shares, strict=True)
    ]


def race_team_limit(port: int) -> tuple[list[int], list[int]]:
    """PHASE_ROUNDS rounds of RACERS clients (client i is member i % 3) racing the team's
    `per_day` limit. Returns the 201s and the jobs read back from the database, per round;
    every other answer must be the limit's refusal."""
    from django.db import connections

    from apps.jobs.models import Job

    created: list[int] = []
    stored: list[int] = []
    refusals: Counter[tuple[int, str]] = Counter()
    for round_no in range(PHASE_ROUNDS):
        members = _race_team(round_no)
        connections.close_all()
        work = [
            [("/api/jobs/", token, {"submission_id": sids[i // 3], "idempotency_key": f"r-{i}"})]
            for i in range(RACERS)
            for token, sids in [members[i % 3]]
        ]
        _, _, results = run_load(port, work)
        created.append(sum(1 for status, _ in results if status == 201))
        refusals.update((s, str(b.get("code"))) for s, b in results if s != 201)
        ids = [sid for _, sids in members for sid in sids]
        stored.append(Job.objects.filter(submission_id__in=ids).count())
    print(
        f"  team race ({PHASE_ROUNDS} rounds x {RACERS} clients over 3 members, per_day "
        f"{RACE_LIMIT}): 201s per round {created}, jobs stored {stored}, "
        f"overshoot {max(stored) - RACE_LIMIT}, refusals {dict(refusals)}",
        flush=True,
    )
    print("    " + _spread("admitted", [float(n) for n in stored]), flush=True)
    assert len(refusals) <= 1, refusals
    return created, stored


def phase_only() -> int:
    """BENCH_PHASE_ONLY=1: only the phase run and the team race, on one server with metrics
    (for comparing two versions of the phase path quickly)."""
    from bench.submit_support.harness import Server, _db_name, _psql_admin, _setup_django

    _psql_admin(f'DROP DATABASE IF EXISTS "{_db_name()}"')
    _psql_admin(f'CREATE DATABASE "{_db_name()}"')
    os.environ["MEDIA_ROOT"] = tempfile.mkdtemp(prefix="yoyaku-bench-media-")
    server: Server | None = None
    try:
        _setup_django()
        from django.core.management import call_command
        from django.db import connections

        call_command("migrate", verbosity=0)
        prepare_challenges()
        connections.close_all()
        server = Server(metrics=True, metrics_dir=tempfile.mkdtemp(prefix="yoyaku-bench-m-"))
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"phase run only; load average before the run {load}", flush=True)
        ratios = run_phase_load(server.port)
        created, stored = race_team_limit(server.port)
        connections.close_all()
        exact = all(n == RACE_LIMIT for n in created + stored)
        return 0 if exact and ratios else 1
    finally:
        if server is not None:
            server.stop()
        from django.db import connections

        connections.close_all()
        _psql_admin(f'DROP DATABASE IF EXISTS "{_db_name()}"')
