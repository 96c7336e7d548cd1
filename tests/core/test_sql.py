"""Raw SQL statements take their table and column names from the models' `_meta`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.exceptions import FieldDoesNotExist
from django.db import connection

# Importing the modules registers their statements.
import apps.jobs.selectors
import apps.jobs.services.idempotency
import apps.quotas.services
import apps.submissions.services.transitions  # noqa: F401
from apps.core.sql import SqlStatement
from apps.jobs.models import IdempotencyKey, Job


@pytest.fixture(autouse=True)
def _registry_restored() -> Iterator[None]:
    """Statements made by a test leave the registry with it."""
    kept = list(SqlStatement.registry)
    yield
    SqlStatement.registry[:] = kept


def test_every_raw_statement_renders_against_the_current_models() -> None:
    assert len(SqlStatement.registry) >= 6
    for statement in SqlStatement.registry:
        sql = statement.render()
        assert "{" not in sql
        assert "}" not in sql


def test_names_come_from_meta_quoted_for_the_database() -> None:
    statement = SqlStatement("SELECT {j.owner} FROM {j} WHERE {j.id} = %s", j=Job)

    quote = connection.ops.quote_name
    assert statement.render() == (
        f"SELECT {quote('owner_id')} FROM {quote(Job._meta.db_table)} WHERE {quote('id')} = %s"  # noqa: S608
    )


def test_a_renamed_field_fails_when_the_statement_renders() -> None:
    statement = SqlStatement("SELECT {k.no_such_field} FROM {k}", k=IdempotencyKey)

    with pytest.raises(FieldDoesNotExist):
        statement.render()


@pytest.mark.django_db
def test_a_statement_runs_with_parameters() -> None:
    statement = SqlStatement("SELECT COUNT(*) FROM {j} WHERE {j.status} = %s", j=Job)

    assert statement.fetchone(["queued"]) == (0,)


@pytest.mark.django_db
def test_a_model_insert_writes_what_create_writes() -> None:
    from django.utils import timezone

    from apps.core.sql import ModelInsert
    from tests.factories.users import make_user

    user = make_user(username="insert")
    now = timezone.now()
    # An auto-incremented key comes back from the INSERT; JSON and defaults are written as
    # the ORM writes them.
    key = IdempotencyKey(
        user_id=user.pk,
        key="k",
        fingerprint="f",
        lock_token="t",
        locked_at=now,
        created_at=now,
        expires_at=now,
    )
    ModelInsert(IdempotencyKey).save(key)
    assert key.pk is not None
    assert not key._state.adding
    stored = IdempotencyKey.objects.get(pk=key.pk)
    assert (stored.key, stored.fingerprint, stored.lock_token) == ("k", "f", "t")
    assert stored.created_at is not None

    from tests.factories.submissions import make_submission

    submission = make_submission(owner=user)
    job = Job(owner_id=user.pk, submission_id=submission.pk, config={"a": [1, "x"]}, cost=2.0)
    ModelInsert(Job).save(job)
    loaded = Job.objects.get(pk=job.pk)
    assert loaded.config == {"a": [1, "x"]}
    assert loaded.status == "queued"
    assert loaded.created_at is not None
