from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.core.permissions import user_is_reviewer


class UserSerializer(serializers.Serializer[Any]):
    """A user as every response shows one: `{"id", "username"}`."""

    id = serializers.IntegerField(read_only=True)
    username = serializers.CharField(read_only=True)


class MeSerializer(UserSerializer):
    is_staff = serializers.BooleanField(read_only=True)
    is_reviewer = serializers.SerializerMethodField()

    def get_is_reviewer(self, user: Any) -> bool:
        return user_is_reviewer(user)


class ErrorSerializer(serializers.Serializer[Any]):
    """The one error body of the whole API."""

    success = serializers.BooleanField(default=False)
    code = serializers.CharField(help_text="Machine-readable error code.")
    error = serializers.CharField(help_text="Human-readable message.")
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Per-field messages, on validation errors.",
    )


class ApiCollectionSerializer(serializers.Serializer[Any]):
    url = serializers.URLField()
    description = serializers.CharField()


class ApiIndexSerializer(serializers.Serializer[Any]):
    """`GET /api/`: links to the schema, the docs, the health check and each collection."""

    name = serializers.CharField()
    schema = serializers.URLField()
    docs = serializers.URLField()
    health = serializers.URLField()
    collections = serializers.DictField(child=ApiCollectionSerializer())
