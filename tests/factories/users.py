from __future__ import annotations

from typing import Any, cast

import factory
from django.contrib.auth.models import User
from factory.declarations import LazyAttribute, PostGenerationMethodCall, Sequence
from factory.helpers import post_generation

from apps.core.permissions import reviewer_permission


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = Sequence(lambda n: f"user{n}")
    email = LazyAttribute(lambda u: f"{u.username}@example.test")
    password = PostGenerationMethodCall("set_password", "pw-for-tests")

    @post_generation
    def reviewer(self, create: bool, extracted: bool | None, **kwargs: object) -> None:
        if create and extracted:
            self.user_permissions.add(reviewer_permission())  # type: ignore[attr-defined]

    @post_generation
    def save_after(self, create: bool, extracted: object, **kwargs: object) -> None:
        if create:
            self.save()  # type: ignore[attr-defined]


def make_user(**fields: Any) -> User:
    """A saved user (typed wrapper around UserFactory); `reviewer=True` grants review rights."""
    return cast(User, UserFactory(**fields))
