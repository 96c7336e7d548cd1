"""The API's JSON parser: DRF's, with a bound on nesting.

A body nested a thousand levels deep made the decoder raise `RecursionError` (a 500), and one
just under the interpreter's limit would reach every recursive walk after it (validation, the
NUL check, storing). Nesting deeper than `MAX_JSON_DEPTH` is a 400 `invalid_request`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

#: Levels of objects/arrays a JSON body may nest (a job's config, a webhook's body, ...).
MAX_JSON_DEPTH = 64

TOO_DEEP = f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels."


def json_depth_exceeds(data: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether `data` nests objects/arrays deeper than `limit` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, Mapping):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


class BoundedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(TOO_DEEP) from None
        if json_depth_exceeds(data):
            raise ParseError(TOO_DEEP)
        return data
