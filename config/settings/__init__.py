"""Yoyaku settings (`DJANGO_SETTINGS_MODULE=config.settings`).

Every value is read once from the environment (django-environ). Every SPEC parameter is a
Django setting of the same name with the SPEC's default, overridable by an environment variable
of that name. Numbers accept fractions so tests and demos can shrink time.

The sections live in modules of this package, read in this order: `environment` (the readers),
`base` (deployment, apps, database, auth, static files, request limits, REST framework),
`domain` (queue, quotas, jobs, submissions, grading, review, schedules) and `observability`
(logging, metrics, pages). A module reads what it needs of an earlier one by name.
"""

from __future__ import annotations

from config.settings.base import *  # noqa: F403
from config.settings.domain import *  # noqa: F403
from config.settings.observability import *  # noqa: F403
