"""Models shared by the whole platform."""

from __future__ import annotations

from django.db import models


class Heartbeat(models.Model):
    """The last sign of life of a named background process (e.g. a plan watcher).

    `beats` counts every tick; it is written by a locked read-modify-write, so concurrent
    tickers never lose one (the same discipline every service uses).
    """

    name = models.CharField(max_length=100, unique=True)
    last_tick = models.DateTimeField()
    beats = models.PositiveBigIntegerField(default=0)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} @ {self.last_tick.isoformat()}"
