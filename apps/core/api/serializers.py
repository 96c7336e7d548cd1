from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.permissions import user_is_reviewer
from apps.core.scopes import SCOPE_ORDER


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


class ScopesField(serializers.ListField):
    child = serializers.ChoiceField(choices=[(s, s) for s in SCOPE_ORDER])


class TokenCreateInputSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(max_length=100, help_text="Unique among your tokens.")
    scopes = ScopesField(
        required=False,
        allow_empty=False,
        min_length=1,
        max_length=len(SCOPE_ORDER) * 2,
        help_text="Default `submit read`. Only scopes your account may hold; a token creating a "
        "token may give only scopes it holds.",
    )
    expires_at = serializers.DateTimeField(
        required=False, allow_null=True, help_text="ISO 8601; null: never expires."
    )

    def validate_name(self, value: str) -> str:
        if not value.isprintable() or value != value.strip():
            raise serializers.ValidationError(
                "Printable characters only, without leading or trailing spaces."
            )
        return value


class TokenOutputSerializer(serializers.Serializer[Any]):
    """A token without its secret (the list): the secret is shown only at creation."""

    id = serializers.CharField(read_only=True)
    name = serializers.CharField(read_only=True)
    scopes = serializers.ListField(
        child=serializers.CharField(), read_only=True, source="scope_list"
    )
    created_at = serializers.DateTimeField(read_only=True)
    expires_at = serializers.DateTimeField(read_only=True, allow_null=True)
    last_used_at = serializers.DateTimeField(read_only=True, allow_null=True)


class TokenCreatedSerializer(serializers.Serializer[Any]):
    """`POST /api/tokens/`: the only answer that holds `token`."""

    id = serializers.CharField(read_only=True, source="api_token.id")
    name = serializers.CharField(read_only=True, source="api_token.name")
    scopes = serializers.ListField(
        child=serializers.CharField(), read_only=True, source="api_token.scope_list"
    )
    expires_at = serializers.DateTimeField(
        read_only=True, allow_null=True, source="api_token.expires_at"
    )
    token = serializers.CharField(
        read_only=True, help_text="The secret: shown this once, stored only as a hash."
    )
