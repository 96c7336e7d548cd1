from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
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


# A field's messages, or (a nested object) that object's fields, or (a list of objects) one
# such object per item, `{}` where an item is valid.
_FIELD_ERRORS = {
    "anyOf": [
        {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "object"}]}},
        {"type": "object"},
    ]
}


@extend_schema_field({"type": "object", "additionalProperties": _FIELD_ERRORS})
class FieldErrorsField(serializers.DictField):
    pass


class ErrorSerializer(serializers.Serializer[Any]):
    """The one error body of the whole API."""

    success = serializers.BooleanField(default=False)
    code = serializers.CharField(help_text="Machine-readable error code.")
    error = serializers.CharField(help_text="Human-readable message.")
    fields = FieldErrorsField(  # type: ignore[assignment]
        required=False,
        help_text='Per-field messages on validation errors: `{"name": ["message"]}`, nested '
        'like the input for an object (`{"birth": {"method": ["..."]}}`).',
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
