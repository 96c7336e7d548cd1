"""OpenAPI: the one error body on every operation, and the answers every operation can give.

`ApiAutoSchema` (the project's `DEFAULT_SCHEMA_CLASS`) adds to each operation what applies to
the whole API rather than to one view: 403/404 for a path with an id (ownership, unknown id),
and whatever an app registers with `operation_responses_register` (the schedule app: the 202
of a header booking and its refusals, on every operation a header booking can target).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.validators import ProhibitNullCharactersValidator
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse

from apps.core.api.serializers import ErrorSerializer

_DESCRIPTIONS = {
    400: "Invalid request (`invalid_request` with `fields`, or a more specific code).",
    401: "Not authenticated (`not_authenticated`, `authentication_failed`).",
    403: "Another user's object, or not allowed (`permission_denied`); a token without the "
    "operation's scope (`insufficient_scope`).",
    404: "Not found (`not_found`).",
    406: "Too late (`too_late`).",
    409: "Conflict with the object's current state.",
    413: "Request too large.",
    415: "Unsupported media type.",
    422: "Unprocessable (e.g. `idempotency_key_reused`).",
    429: "Limit reached (`quota_exceeded`, `rate_limited`, `cost_limit_exceeded`).",
}


def error_response(status: int, description: str | None = None) -> OpenApiResponse:
    return OpenApiResponse(
        ErrorSerializer, description=description or _DESCRIPTIONS.get(status, "Error.")
    )


def error_responses(*statuses: int, **descriptions: str) -> dict[int, Any]:
    """`{status: OpenApiResponse(ErrorSerializer)}` for `@extend_schema(responses=...)`.

    401 and 403 (a token outside its scopes: `insufficient_scope`) are always included.
    `descriptions` override by `_<status>`: `_409="... codes ..."`.
    """
    return {
        status: error_response(status, descriptions.get(f"_{status}"))
        for status in sorted({401, 403, *statuses})
    }


#: (does it apply to this path?, {status: response}) pairs registered by apps.
_OPERATION_RESPONSES: list[tuple[Callable[[str], bool], dict[int, Any]]] = []


def operation_responses_register(applies: Callable[[str], bool], responses: dict[int, Any]) -> None:
    """Document `responses` on every operation whose path `applies` (unless it documents that
    status itself). Call from an `AppConfig.ready()`."""
    _OPERATION_RESPONSES.append((applies, responses))


#: A text input never holds NUL (SPEC §3; DRF's CharField refuses it): the schema says so.
NO_NUL_PATTERN = "^[^\\x00]*$"


class ApiAutoSchema(AutoSchema):
    # The direction of the serializer being mapped: the NUL rule is about inputs only.
    _direction: str | None = None

    def _map_basic_serializer(self, serializer: Any, direction: Any) -> dict[str, Any]:
        outer, self._direction = self._direction, str(direction)
        try:
            schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)
        finally:
            self._direction = outer
        return schema

    def _insert_field_validators(self, field: Any, schema: dict[str, Any]) -> None:
        super()._insert_field_validators(field, schema)
        refuses_nul = any(
            isinstance(validator, ProhibitNullCharactersValidator)
            for validator in getattr(field, "validators", [])
        )
        if (
            refuses_nul
            and self._direction == "request"
            and schema.get("type") == "string"
            and not {"pattern", "enum", "format", "oneOf"} & schema.keys()
        ):
            schema["pattern"] = NO_NUL_PATTERN

    def _map_serializer(
        self, serializer: Any, direction: Any, bypass_extensions: bool = False
    ) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_serializer(serializer, direction, bypass_extensions)
        # An input whose unknown fields are refused (not ignored, as DRF does) says so.
        if direction == "request" and getattr(serializer, "refuses_unknown_fields", False):
            schema["additionalProperties"] = False
        return schema

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        if not responses.get("200", responses.get("201")):
            return responses
        extra: dict[int, Any] = {}
        if "{" in self.path:
            extra[403] = error_response(403)
            extra[404] = error_response(404, "Unknown id (`not_found`), or a malformed one.")
        for applies, registered in _OPERATION_RESPONSES:
            if applies(self.path):
                extra.update(registered)
        for status, response in sorted(extra.items()):
            if str(status) not in responses:
                responses[str(status)] = self._get_response_for_code(
                    response, str(status), None, direction
                )
        return dict(sorted(responses.items()))
