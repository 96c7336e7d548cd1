"""The environment, read once: `env` (django-environ, with the project's `.env` when present)
and the number and mapping readers every settings module uses. Read first (the package imports
it first), so django-stubs' run-time generics are in place before any application module."""

from __future__ import annotations

from pathlib import Path

import django_stubs_ext
import environ
from django.core.exceptions import ImproperlyConfigured

# Lets generic classes (ModelAdmin[Model], QuerySet[Model]) be subscripted at run time.
django_stubs_ext.monkeypatch()

#: The project folder (the settings' BASE_DIR).
ROOT = Path(__file__).resolve().parents[2]

env = environ.Env()
environ.Env.read_env(ROOT / ".env", overwrite=False)


def env_number(name: str, default: float) -> int | float:
    """A number from the environment: an int when integral, else a float ("0.05" is fine)."""
    raw = env.str(name, default=str(default))
    try:
        value = float(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from exc
    return int(value) if value.is_integer() else value


def env_mapping(name: str, default: str) -> dict[str, float]:
    """`small=1,medium=2,large=4` -> {"small": 1, "medium": 2, "large": 4}."""
    result: dict[str, float] = {}
    for item in env.str(name, default=default).split(","):
        if not item.strip():
            continue
        key, _, value = item.partition("=")
        try:
            number = float(value)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: bad entry {item!r}") from exc
        result[key.strip()] = int(number) if number.is_integer() else number
    return result
