"""Limit/offset pages for list endpoints, with the query checked like any other input: a
`limit` that is not an integer in range is a 400 `invalid_request`, never silently the default."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.utils.http import urlencode
from rest_framework import serializers
from rest_framework.request import Request

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
MAX_OFFSET = 2**31 - 1


class PageQuerySerializer(serializers.Serializer[Any]):
    limit = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_LIMIT,
        default=DEFAULT_LIMIT,
        help_text="Items per page.",
    )
    offset = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_OFFSET, default=0, help_text="Items to skip."
    )


@dataclass(frozen=True)
class Page:
    count: int
    next: str | None
    previous: str | None
    results: list[Any]


def page_of(queryset: QuerySet[Any], *, request: Request, limit: int, offset: int) -> Page:
    """One page of `queryset` with absolute links to its neighbours."""
    count = queryset.count()
    results = list(queryset[offset : offset + limit])

    def link(at: int) -> str:
        query = request.query_params.copy()
        query["limit"] = str(limit)
        query["offset"] = str(at)
        return request.build_absolute_uri(request.path) + "?" + urlencode(query, doseq=True)

    return Page(
        count=count,
        next=link(offset + limit) if offset + limit < count else None,
        previous=link(max(0, offset - limit)) if offset > 0 else None,
        results=results,
    )


class PageOutputSerializer(serializers.Serializer[Any]):
    """Subclass with `results = ItemSerializer(many=True)`."""

    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
