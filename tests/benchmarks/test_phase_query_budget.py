"""Query budget of a phase submission's enqueue: the phase's check (the team, the window, the
limits) costs one statement, one round trip, on top of a plain submission (a regression costs
throughput)."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from apps.quotas.models import QuotaPolicy
from tests.benchmarks.phases import (
    apply_challenge,
    make_host,
    participate,
    phase_limits,
    submit_to_phase,
)
from tests.benchmarks.teams import enqueued, team_join, team_made
from tests.factories.submissions import make_submission
from tests.factories.users import make_user
from tests.jobs.test_query_budget import plain_submission_queries

pytestmark = pytest.mark.django_db
Clients = Callable[[User], APIClient]


def _queries(client: APIClient, submission_id: str, key: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = enqueued(client, submission_id, idempotency_key=key)
    assert response.status_code == HTTPStatus.CREATED, response.json()
    return [query["sql"] for query in captured.captured_queries]


def test_a_phase_enqueue_costs_one_statement_more_than_a_plain_one(
    client_for: Clients,
) -> None:
    apply_challenge(
        client_for(make_host()), phase_limits("dev", per_day=50, total=50, concurrent=50)
    )
    ann, bob = make_user(username="ann"), make_user(username="bob")
    ann_client, bob_client = client_for(ann), client_for(bob)
    for user, client in ((ann, ann_client), (bob, bob_client)):
        QuotaPolicy.objects.create(user=user)
        participate(client)
        # The token's first use writes its last_used_at (then at most once a minute).
        assert client.get("/api/me/").status_code == HTTPStatus.OK
    team_join(bob_client, team_made(ann_client, "Owls")["invite_code"])

    plain = _queries(ann_client, make_submission(owner=ann).pk, "plain")
    phase = _queries(
        bob_client, submit_to_phase(bob_client, "dev").json()["submission_id"], "phase"
    )
    assert len(plain) == plain_submission_queries(), plain
    assert len(phase) == len(plain) + 1, phase
