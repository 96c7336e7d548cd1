"""`challenge.yaml`: parsed safely, then validated by a JSON Schema (Draft 2020-12).

The YAML is read with `yaml.safe_load` only, after three bounds: at most `MAX_MANIFEST_BYTES`,
nesting at most `MAX_MANIFEST_DEPTH` deep, and no anchor or alias at all (a "billion laughs"
document expands aliases into an exponential tree that no later step could walk). Timestamps
YAML reads as dates become ISO strings, so the schema sees exactly JSON. Each schema error is
reported under its YAML path (`phases[1].metrics[0].direction`), with a message written for a
person.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from apps.benchmarks.exceptions import InvalidBundle

MAX_MANIFEST_BYTES = 256 * 1024
MAX_DESCRIPTION_BYTES = 1024 * 1024
MAX_MANIFEST_DEPTH = 16
SLUG_PATTERN = "^[a-z0-9-]{1,50}$"
METRIC_KEY_PATTERN = "^[a-z0-9_]{1,40}$"
SPLIT_PATTERN = "^[a-z0-9_-]{1,50}$"
DEFAULT_FILE_TYPES = [".csv", ".json", ".jsonl", ".txt", ".yaml", ".zip", ".tar.gz"]

_TEXT = {"type": "string", "minLength": 1, "maxLength": 200}
_PATH = {"type": "string", "minLength": 1, "maxLength": 250}
_COUNT = {"type": "integer", "minimum": 0}

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["slug", "title", "phases"],
    "properties": {
        "slug": {"type": "string", "pattern": SLUG_PATTERN},
        "title": _TEXT,
        "description": _PATH,
        "visibility": {"enum": ["public", "unlisted", "private"]},
        "participation": {"enum": ["open", "approval"]},
        "max_team_size": {"type": "integer", "minimum": 1, "maximum": 1000},
        "hosts": {
            "type": "array",
            "maxItems": 100,
            "items": {"type": "string", "minLength": 1, "maxLength": 150},
        },
        "phases": {
            "type": "array",
            "minItems": 1,
            "maxItems": 50,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": [
                    "slug",
                    "title",
                    "start",
                    "kind",
                    "reference_data",
                    "scoring_program",
                    "scoring_entrypoint",
                    "metrics",
                    "primary",
                    "splits",
                ],
                "properties": {
                    "slug": {"type": "string", "pattern": SLUG_PATTERN},
                    "title": _TEXT,
                    "start": {"type": "string"},
                    "end": {"type": ["string", "null"]},
                    "kind": {"enum": ["predictions", "code"]},
                    "input_data": _PATH,
                    "public_data": _PATH,
                    "reference_data": _PATH,
                    "scoring_program": _PATH,
                    "scoring_entrypoint": _PATH,
                    "metrics": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 50,
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["key", "direction"],
                            "properties": {
                                "key": {"type": "string", "pattern": METRIC_KEY_PATTERN},
                                "label": _TEXT,
                                "direction": {"enum": ["max", "min"]},
                                "precision": {"type": "integer", "minimum": 0, "maximum": 12},
                            },
                        },
                    },
                    "primary": {"type": "string", "pattern": METRIC_KEY_PATTERN},
                    "splits": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 20,
                        "items": {"type": "string", "pattern": SPLIT_PATTERN},
                    },
                    "reveal": {"type": "string"},
                    "final_selection": {"type": "integer", "minimum": 0, "maximum": 100},
                    "file_types": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 50,
                        "items": {
                            "type": "string",
                            "pattern": "^\\.[A-Za-z0-9][A-Za-z0-9.]{0,19}$",
                        },
                    },
                    "limits": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {"per_day": _COUNT, "total": _COUNT, "concurrent": _COUNT},
                    },
                    "resources": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "timeout": {"type": "integer", "minimum": 1},
                            "memory_mb": {"type": "integer", "minimum": 16},
                        },
                    },
                    "baselines": {"type": "array", "maxItems": 20, "items": _PATH},
                },
            },
        },
    },
}

Draft202012Validator.check_schema(SCHEMA)
_VALIDATOR = Draft202012Validator(SCHEMA)

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "object": "a mapping",
    "array": "a list",
    "null": "empty",
    "number": "a number",
    "boolean": "true or false",
}


def yaml_path(parts: Iterable[str | int]) -> str:
    """`["phases", 1, "metrics", 0, "direction"]` → `phases[1].metrics[0].direction`."""
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "challenge.yaml"


def _choices(values: list[Any]) -> str:
    shown = [str(value) for value in values]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def _message(error: ValidationError) -> str:
    validator, expected = error.validator, error.validator_value
    if validator == "enum":
        return f"must be {_choices(list(expected))}"
    if validator == "type":
        names = [expected] if isinstance(expected, str) else list(expected)
        return f"must be {_choices([_TYPE_NAMES.get(name, name) for name in names])}"
    if validator == "pattern":
        return f"must match {expected}"
    if validator == "minLength":
        return "must not be empty" if expected == 1 else f"must be at least {expected} characters"
    if validator == "maxLength":
        return f"must be at most {expected} characters"
    if validator == "minimum":
        return f"must be at least {expected}"
    if validator == "maximum":
        return f"must be at most {expected}"
    if validator == "minItems":
        return f"must hold at least {expected} item{'s' if expected != 1 else ''}"
    if validator == "maxItems":
        return f"must hold at most {expected} items"
    return str(error.message)


def schema_errors(document: Any) -> dict[str, list[str]]:
    """Every schema error of `document`, keyed by YAML path (an unknown or missing key is
    reported at its own path)."""
    fields: dict[str, list[str]] = {}
    for error in _VALIDATOR.iter_errors(document):
        parts = list(error.absolute_path)
        if error.validator == "required":
            present = error.instance if isinstance(error.instance, dict) else {}
            for key in error.validator_value:
                if key not in present:
                    fields.setdefault(yaml_path([*parts, key]), []).append("is required")
            continue
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            known = error.schema.get("properties", {})
            for key in error.instance:
                if key not in known:
                    fields.setdefault(yaml_path([*parts, str(key)]), []).append(
                        "is not a known field"
                    )
            continue
        fields.setdefault(yaml_path(parts), []).append(_message(error))
    return fields


def _jsonable(value: Any) -> Any:
    """YAML's own types as JSON's: timestamps as ISO strings; keys as strings."""
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def _refuse_expansions(text: str) -> None:
    """Walk the YAML's events (no document is built): refuse anchors, aliases and nesting
    deeper than `MAX_MANIFEST_DEPTH`, before `safe_load` builds anything."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise InvalidBundle(
                "challenge.yaml uses YAML anchors or aliases, which bundles do not allow.",
                fields={"challenge.yaml": ["must not use anchors or aliases (& and *)"]},
            )
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_MANIFEST_DEPTH:
                raise InvalidBundle(
                    "challenge.yaml is nested too deeply.",
                    fields={"challenge.yaml": [f"must nest at most {MAX_MANIFEST_DEPTH} levels"]},
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def manifest_too_large() -> InvalidBundle:
    return InvalidBundle(
        f"challenge.yaml is larger than {MAX_MANIFEST_BYTES} bytes.",
        fields={"challenge.yaml": [f"must be at most {MAX_MANIFEST_BYTES} bytes"]},
    )


def manifest_load(data: bytes) -> Any:
    """The document of `challenge.yaml` as JSON values; InvalidBundle for text that is not
    UTF-8, too large, not YAML, or uses anchors/aliases. The schema is not checked here."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise manifest_too_large()
    try:
        text = data.decode("utf-8")
        _refuse_expansions(text)
        document = yaml.safe_load(text)
    except InvalidBundle:
        raise
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError, ValueError) as exc:
        problem = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise InvalidBundle(
            "challenge.yaml is not valid YAML.",
            fields={"challenge.yaml": [f"is not valid UTF-8 YAML: {problem}"]},
        ) from exc
    return _jsonable(document)


def manifest_validate(document: Any) -> None:
    """InvalidBundle with every schema error keyed by YAML path, or None."""
    fields = schema_errors(document)
    if fields:
        raise InvalidBundle("challenge.yaml does not follow the bundle schema.", fields=fields)
