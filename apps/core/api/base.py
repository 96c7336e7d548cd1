"""The one idiom of every API view: `ApiView` (and `PublicApiView` for the few open ones).

A view reads the way a request flows: validate the input (`self.body(...)` /
`self.query(...)`, which raise the SPEC's 400 with nested `fields`), call one service or
selector with the typed `self.user`, and answer through an output serializer
(`self.respond(...)`), which is also what the schema documents. Object ownership is the
selectors' (`apps.core.selectors.owned_get`: another user's object → 403 `permission_denied`,
never its data).

A role is a view's declaration, asked once before any handler runs: reviewer-only views set
`permission_classes = [IsReviewer]` (`[IsReviewerOrStaff]` where staff may act too), and the
services they call do not ask the role again. Every view of the review API and the review page
declare it (`tests/core/test_api_base.py` walks every URL under /api/review/ and /review/ as a
plain user and as a reviewer).

Token scopes are checked here for every view, deny by default: a request authenticated by an
API token runs only when the token holds the view's scope for it (`scope_for`: `read` for a
safe method, `submit` for any other, unless the view declares `token_scopes` per method or
overrides `scope_for`), else 403 `insufficient_scope`. Sessions, passwords and the platform's
own self-calls carry no scopes.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, ClassVar

from django.contrib.auth.models import AbstractBaseUser
from django.utils.datastructures import MultiValueDict
from rest_framework import serializers
from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import AllowAny, BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.parsers import BoundedJSONParser
from apps.core.exceptions import InvalidRequest
from apps.core.handlers import validation_fields, validation_message
from apps.core.models import ApiToken
from apps.core.permissions import NotReviewer, user_is_reviewer
from apps.core.scopes import call_scope, method_scope, scopes_require

Serializer = serializers.BaseSerializer[Any]


def invalid_input(errors: Any, *, error: type[InvalidRequest] = InvalidRequest) -> InvalidRequest:
    """The domain error of input that failed validation, with the SPEC's nested `fields`."""
    fields = validation_fields(errors)
    return error(validation_message(fields), fields=fields)


def single_values(
    params: MultiValueDict[str, Any], names: Any, *, error: type[InvalidRequest] = InvalidRequest
) -> dict[str, Any]:
    """Query parameters as a plain dict, so an empty value is validated like any other (DRF
    skips a blank optional value of a form) and a parameter sent twice is refused."""
    values: dict[str, Any] = {}
    repeated: dict[str, list[str]] = {}
    for name in names:
        if name not in params:
            continue
        given = params.getlist(name)
        if len(given) > 1:
            repeated[name] = ["Give this parameter once."]
        values[name] = given[-1]
    if repeated:
        raise invalid_input(repeated, error=error)
    return values


class IsReviewer(BasePermission):
    """Users with the reviewer permission (`apps.core.permissions`); others → 403."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False  # DRF answers 401 for an unauthenticated request
        if not user_is_reviewer(request.user):
            raise NotReviewer()
        return True


class IsReviewerOrStaff(IsReviewer):
    """Reviewers and staff; others → 403."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if request.user and getattr(request.user, "is_staff", False):
            return True
        return super().has_permission(request, view)


class ApiView(APIView):
    """Base of every authenticated API view (deny by default)."""

    permission_classes = [IsAuthenticated]
    parser_classes = [BoundedJSONParser]
    #: The error a body that fails validation raises (a more specific code where the SPEC
    #: names one, e.g. `invalid_schedule`).
    invalid_input_error: ClassVar[type[InvalidRequest]] = InvalidRequest
    #: The scope a token needs, per HTTP method ("*" for every method); a method not named
    #: here derives its scope (`read` for GET/HEAD/OPTIONS, `submit` for any other).
    token_scopes: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def scope_for(cls, method: str, body: Any = None) -> str | None:
        """The scope a token needs for `method` on this view (None: none, the view is open).
        `body` is the request's parsed body where a view's scope depends on it (it may be
        anything a client sent)."""
        method = method.upper()
        return cls.token_scopes.get(method) or cls.token_scopes.get("*") or method_scope(method)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if isinstance(request.auth, ApiToken):
            scope = self.scope_for(request.method or "GET")
            if scope is not None:
                self.scope_require(scope)

    @property
    def token(self) -> ApiToken | None:
        """The API token that authenticated the request (None for a session or password)."""
        auth = self.request.auth
        return auth if isinstance(auth, ApiToken) else None

    def scope_require(self, scope: str) -> None:
        """InsufficientScope (403) unless the request's token holds `scope` (no token: no
        scope limit)."""
        token = self.token
        if token is not None:
            scopes_require(token, scope)

    def scope_require_for_call(self, *, method: str, path: str, body: Any = None) -> None:
        """For a request the platform will make later as this user (a Life's action, a header
        booking): the token must hold the scope that request's view needs."""
        if self.token is not None:
            self.scope_require(call_scope(method=method, path=path, body=body))

    @property
    def user(self) -> AbstractBaseUser:
        """The authenticated user (the permission check ran before any handler)."""
        user = self.request.user
        if not isinstance(user, AbstractBaseUser):
            raise NotAuthenticated()
        return user

    def body(self, serializer_class: type[Serializer], **context: Any) -> dict[str, Any]:
        """The request body, validated by `serializer_class`; else 400 with `fields`."""
        return self.validated(serializer_class, self.request.data, **context)

    def query(self, serializer_class: type[Serializer]) -> dict[str, Any]:
        """The query parameters `serializer_class` declares, validated; else 400 with `fields`
        (an empty or repeated parameter is an error, never ignored)."""
        names = serializer_class().fields.keys()  # type: ignore[attr-defined]
        return self.validated(
            serializer_class,
            single_values(self.request.query_params, names, error=self.invalid_input_error),
        )

    def validated(
        self,
        serializer_class: type[Serializer],
        data: Any,
        *,
        error: type[InvalidRequest] | None = None,
        **context: Any,
    ) -> dict[str, Any]:
        serializer = serializer_class(data=data, context={"request": self.request, **context})
        if not serializer.is_valid():
            raise invalid_input(serializer.errors, error=error or self.invalid_input_error)
        validated: Mapping[str, Any] = serializer.validated_data
        return dict(validated)

    def respond(
        self,
        serializer_class: type[Serializer],
        instance: Any,
        *,
        status: int = HTTPStatus.OK,
        many: bool = False,
        headers: dict[str, str] | None = None,
        **context: Any,
    ) -> Response:
        """Render `instance` through its output serializer (the schema documents the same)."""
        data = serializer_class(instance, many=many, context={"request": self.request, **context})
        return Response(data.data, status=status, headers=headers)


class PublicApiView(ApiView):
    """An API view open without authentication (the index): no scope needed either."""

    permission_classes = [AllowAny]

    @classmethod
    def scope_for(cls, method: str, body: Any = None) -> str | None:
        return None
