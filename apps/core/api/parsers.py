"""The API's JSON parser: DRF's, with a bound on nesting.

A body nested a thousand levels deep made the decoder raise `RecursionError` (a 500), and one
just under the interpreter's limit would reach every recursive walk after it (validation, the
NUL check, storing). Nesting deeper than `MAX_JSON_DEPTH` is a 400 `invalid_request`.

A `\\ud800`-style escape decodes to a lone surrogate, which is no character: stored in a job's
config or a webhook's body, it broke every later rendering of that row (a 500 on the list). Such
a string anywhere in a body (a key or a value) is a 400 too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

#: Levels of objects/arrays a JSON body may nest (a job's config, a webhook's body, ...).
MAX_JSON_DEPTH = 64

TOO_DEEP = f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels."
SURROGATE = "JSON parse error - lone surrogate escapes (\\ud800-\\udfff) are not characters."
_SURROGATE = re.compile("[\ud800-\udfff]")


def _is_surrogate_text(value: Any) -> bool:
    return isinstance(value, str) and _SURROGATE.search(value) is not None


def json_problem(data: Any, limit: int = MAX_JSON_DEPTH) -> str | None:
    """Why `data` is refused: nested deeper than `limit`, or a lone surrogate in a key or a
    string (iterative: no recursion); None when it is fine."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, Mapping):
            if any(_is_surrogate_text(key) for key in value):
                return SURROGATE
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        elif _is_surrogate_text(value):
            return SURROGATE
        else:
            continue
        if depth > limit:
            return TOO_DEEP
        stack.extend((child, depth + 1) for child in children)
    return None


class BoundedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(TOO_DEEP) from None
        problem = json_problem(data)
        if problem is not None:
            raise ParseError(problem)
        return data
