"""Reading `/metrics` in tests: a real scrape through the view, parsed with prometheus-client's
own parser, and the sum of the samples matching a label subset."""

from __future__ import annotations

from dataclasses import dataclass

from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

TOKEN = "test-metrics-token"


@dataclass(frozen=True)
class Scrape:
    """Every sample of one scrape: (sample name, labels) -> value, and the family names."""

    samples: dict[tuple[str, frozenset[tuple[str, str]]], float]
    families: frozenset[str]
    text: str

    def value(self, name: str, **labels: str) -> float:
        """The sum of the samples called `name` whose labels include `labels` (0 if none)."""
        wanted = set(labels.items())
        return sum(v for (n, ls), v in self.samples.items() if n == name and wanted <= ls)

    def has_sample(self, name: str) -> bool:
        return any(n == name for n, _ in self.samples)

    def labels_of(self, name: str, label: str) -> set[str]:
        return {dict(ls)[label] for n, ls in self.samples if n == name and label in dict(ls)}


def parse(text: str) -> Scrape:
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    families: set[str] = set()
    for family in text_string_to_metric_families(text):
        families.add(family.name)
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            samples[key] = samples.get(key, 0.0) + sample.value
    return Scrape(samples=samples, families=frozenset(families), text=text)


def scrape(settings: object) -> Scrape:
    """Scrape /metrics through the Django view (every process's files plus the database)."""
    settings.METRICS_TOKEN = TOKEN  # type: ignore[attr-defined]
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    return parse(response.content.decode())


def deltas(before: Scrape, after: Scrape, name: str, label: str) -> dict[str, float]:
    """{label value: after - before} of counter `name` for every value that moved."""
    values = before.labels_of(name, label) | after.labels_of(name, label)
    moved = {v: after.value(name, **{label: v}) - before.value(name, **{label: v}) for v in values}
    return {v: d for v, d in moved.items() if d}
