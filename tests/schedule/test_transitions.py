"""Plan and Life state changes through `PLAN_TRANSITIONS` / `LIFE_TRANSITIONS` (service level,
no HTTP): the bulk writers (arming, release, start) and the single ones obey the same table,
an illegal or stale move raises and leaves the row, and one arming wins a race."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from apps.core.exceptions import InvalidTransition
from apps.schedule.execution.claims import plan_claim, plan_claims_release
from apps.schedule.execution.executor import plans_start
from apps.schedule.models import (
    PLAN_TRANSITIONS,
    TASK_RUN_TRANSITIONS,
    Life,
    LifeState,
    Plan,
    PlanKind,
    PlanState,
    TaskRun,
)
from apps.schedule.services.lives import life_cancel
from apps.schedule.services.plans import (
    lease_seconds,
    life_set_state,
    plan_set_state,
    plans_set_state,
)
from apps.schedule.task_runs import task_run_execute
from tests.concurrency import run_concurrently
from tests.factories.schedule import book_point, book_term

P = PlanState


def _far() -> dt.datetime:
    return timezone.now() + dt.timedelta(hours=2)


def _after_lease() -> dt.datetime:
    return timezone.now() + dt.timedelta(seconds=lease_seconds() + 1)


@pytest.mark.django_db
def test_arming_release_re_arming_and_start_follow_the_table(user: User) -> None:
    plan = book_point(user, url="/api/me/", in_seconds=60).plans.get()

    [first] = plan_claim(owner="w1", horizon=_far())
    assert plan_claims_release(owner="w1", plan_ids=[plan.pk]) == 1
    plan_claim(owner="w1", horizon=_far())
    # w1 died: after its lease another watcher re-arms the plan (Preset → Preset).
    later = _after_lease()
    [taken] = plan_claim(owner="w2", now=later, horizon=later + dt.timedelta(hours=2))
    started = plans_start(items=[(plan.pk, first.token), (plan.pk, taken.token)])

    row = Plan.objects.get(pk=plan.pk)
    assert row.state == P.RUNNING
    assert list(started) == [plan.pk]
    assert taken.token != first.token
    assert row.arm_token == taken.token


@pytest.mark.django_db
def test_re_arming_goes_through_the_table(user: User, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = book_point(user, url="/api/me/", in_seconds=60).plans.get()
    plan_claim(owner="w1", horizon=_far())
    armed = Plan.objects.get(pk=plan.pk)
    monkeypatch.setitem(
        PLAN_TRANSITIONS.table, P.PRESET, frozenset({P.RUNNING, P.STANDBY, P.CANCELLED})
    )

    later = _after_lease()
    with pytest.raises(InvalidTransition):
        plan_claim(owner="w2", now=later, horizon=later + dt.timedelta(hours=2))

    row = Plan.objects.get(pk=plan.pk)
    assert (row.state, row.lease_owner, row.arm_token) == (P.PRESET, "w1", armed.arm_token)


@pytest.mark.django_db
def test_cancelling_a_born_term_life_re_arms_its_preset_death_now(user: User) -> None:
    life = book_term(user, birth_url="/api/me/", death_url="/api/me/", in_seconds=60)
    birth = life.plans.get(kind=PlanKind.BIRTH)
    Plan.objects.filter(pk=birth.pk).update(state=P.DONE)
    Life.objects.filter(pk=life.pk).update(state=LifeState.ALIVE)
    plan_claim(owner="w1", horizon=timezone.now() + dt.timedelta(hours=3))
    death = life.plans.get(kind=PlanKind.DEATH)
    assert death.state == P.PRESET

    life_cancel(life_uuid=life.life_uuid, user=user)

    row = Plan.objects.get(pk=death.pk)
    assert (row.state, row.lease_owner) == (P.PRESET, "cancel")
    assert row.arm_token != death.arm_token


@pytest.mark.django_db
def test_an_illegal_plan_move_raises_and_leaves_the_row(user: User) -> None:
    plan = book_point(user, url="/api/me/", in_seconds=60).plans.get()
    Plan.objects.filter(pk=plan.pk).update(state=P.DONE)
    plan.refresh_from_db()

    with pytest.raises(InvalidTransition) as caught:
        plan_set_state(plan=plan, to=P.RUNNING, lease_owner="me")
    moved = plans_set_state(Plan.objects.all(), old=P.STANDBY, to=P.PRESET)
    with pytest.raises(InvalidTransition):
        plans_set_state(Plan.objects.all(), old=P.DONE, to=P.STANDBY)

    assert caught.value.code == "invalid_transition"
    assert moved == 0
    row = Plan.objects.get(pk=plan.pk)
    assert (row.state, row.lease_owner) == (P.DONE, "")


@pytest.mark.django_db
def test_a_stale_plan_cannot_overwrite_a_newer_state(user: User) -> None:
    plan = book_point(user, url="/api/me/", in_seconds=60).plans.get()
    stale = Plan.objects.get(pk=plan.pk)
    plan_set_state(plan=plan, to=P.CANCELLED)

    with pytest.raises(InvalidTransition):
        plan_set_state(plan=stale, to=P.PRESET, lease_owner="late")

    row = Plan.objects.get(pk=plan.pk)
    assert (row.state, row.lease_owner) == (P.CANCELLED, "")


@pytest.mark.django_db
def test_an_illegal_life_move_raises_and_leaves_the_row(user: User) -> None:
    life = book_point(user, url="/api/me/", in_seconds=60)
    life_set_state(life=life, to=LifeState.DEAD)

    with pytest.raises(InvalidTransition):
        life_set_state(life=life, to=LifeState.ALIVE)
    with pytest.raises(InvalidTransition):
        life_cancel(life_uuid=life.life_uuid, user=user)

    assert Life.objects.get(pk=life.pk).state == LifeState.DEAD


@pytest.mark.django_db
def test_releasing_claims_touches_only_the_owners_preset_plans(user: User) -> None:
    mine = book_point(user, url="/api/me/", in_seconds=60).plans.get()
    theirs = book_point(user, url="/api/me/", in_seconds=90).plans.get()
    plan_claim(owner="w1", horizon=_far(), limit=1)
    plan_claim(owner="w2", horizon=_far(), limit=1)

    released = plan_claims_release(owner="w1", plan_ids=[mine.pk, theirs.pk])

    assert released == 1
    states = dict(Plan.objects.values_list("pk", "state"))
    assert states == {mine.pk: P.STANDBY, theirs.pk: P.PRESET}


@pytest.mark.django_db(transaction=True)
def test_racing_watchers_re_arm_an_abandoned_claim_once(user: User) -> None:
    plan = book_point(user, url="/api/me/", in_seconds=60).plans.get()
    plan_claim(owner="dead", horizon=_far())
    later = _after_lease()
    horizon = later + dt.timedelta(hours=2)

    outcomes = run_concurrently(lambda i: plan_claim(owner=f"w{i}", now=later, horizon=horizon), 6)

    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    armed = [(i, a) for i, o in enumerate(outcomes) for a in o.value]
    assert len(armed) == 1
    winner, item = armed[0]
    row = Plan.objects.get(pk=plan.pk)
    assert (row.state, row.lease_owner, row.arm_token) == (P.PRESET, f"w{winner}", item.token)


@pytest.mark.django_db(transaction=True)
def test_racing_deliveries_of_one_arming_start_the_plan_once(user: User) -> None:
    plan = book_point(user, url="/api/me/", in_seconds=60).plans.get()
    [armed] = plan_claim(owner="w1", horizon=_far())

    outcomes = run_concurrently(lambda _: plans_start(items=[(plan.pk, armed.token)]), 6)

    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    assert sum(len(o.value) for o in outcomes) == 1
    assert Plan.objects.get(pk=plan.pk).state == P.RUNNING


@pytest.mark.django_db
def test_a_task_run_ends_once_through_its_table(user: User) -> None:
    unknown = TaskRun.objects.create(owner=user, topic="no.such.topic", content={})

    first = task_run_execute(task_run_id=unknown.pk)
    again = task_run_execute(task_run_id=unknown.pk)
    with pytest.raises(InvalidTransition):
        TASK_RUN_TRANSITIONS.move(
            TaskRun.objects.filter(pk=unknown.pk),
            old=TaskRun.State.FAILED,
            to=TaskRun.State.DONE,
        )

    row = TaskRun.objects.get(pk=unknown.pk)
    assert (first, again) == ("failed", "skipped")
    assert (row.state, row.error) == (TaskRun.State.FAILED, "unknown topic")
