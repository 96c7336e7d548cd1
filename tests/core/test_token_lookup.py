"""The token lookup of every API request is one raw join (`token_with_user`): it must read what
the ORM's `select_related("user")` read, with the values converted as a query converts them."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from apps.core.models import ApiToken
from apps.core.selectors import token_with_user
from tests.factories.tokens import make_token

pytestmark = pytest.mark.django_db


def test_the_join_reads_what_the_orm_reads(user: User, django_assert_num_queries: Any) -> None:
    make_token(user, expires_at=timezone.now() + dt.timedelta(days=1))
    stored = ApiToken.objects.select_related("user").get(user=user)
    stored.last_used_at = timezone.now()
    stored.save(update_fields=["last_used_at"])
    expected = ApiToken.objects.select_related("user").get(pk=stored.pk)

    with django_assert_num_queries(1):
        found = token_with_user(key_id=stored.key_id)
        assert found is not None
        assert found.user.is_active  # loaded with the token: no second query
    for field in ApiToken._meta.concrete_fields:
        assert getattr(found, field.attname) == getattr(expected, field.attname), field.name
    for field in User._meta.concrete_fields:
        assert getattr(found.user, field.attname) == getattr(expected.user, field.attname)
    assert found.expires_at is not None
    assert timezone.is_aware(found.expires_at)
    assert found.last_used_at is not None
    assert timezone.is_aware(found.last_used_at)
    assert found.user.date_joined.tzinfo is not None
    assert found._state.adding is False


def test_an_unknown_key_id_is_none(user: User) -> None:
    make_token(user)
    assert token_with_user(key_id="000000000000") is None
