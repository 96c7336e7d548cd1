"""Registrations of the benchmarks app (imported from `BenchmarksConfig.ready()`): what the
apps below it call through their registries without importing this app."""

from __future__ import annotations
