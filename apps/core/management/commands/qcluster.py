"""`manage.py qcluster`: django-q2's command, with a cluster that stops within seconds on
SIGTERM (see `apps.core.cluster`). It takes precedence over django-q2's because `apps.core`
comes before `django_q` in INSTALLED_APPS."""

from __future__ import annotations

import gc
from typing import Any

import django_q.cluster
from django_q.management.commands.qcluster import Command as DjangoQCommand

from apps.core.cluster import GracefulSentinel


class Command(DjangoQCommand):
    def handle(self, *args: Any, **options: Any) -> None:
        # `Cluster.start` creates its sentinel from this module-level name; this process only
        # ever starts this one cluster.
        django_q.cluster.Sentinel = GracefulSentinel
        super().handle(*args, **options)
        # The cluster runs; this process now only waits for a signal to stop it, then exits.
        # Exempting what it holds from the garbage collector spares the final collection at
        # exit, which took about a second of a stop.
        gc.freeze()
