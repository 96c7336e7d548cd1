"""Registrations of the benchmarks app (imported from `BenchmarksConfig.ready()`): what the
apps below it call through their registries without importing this app."""

from __future__ import annotations

from apps.benchmarks.services.scoring import EntryPhaseProvider
from apps.grading.phases import phase_provider_register

# Phase submissions are graded in two stages and their scores written with the result.
phase_provider_register(EntryPhaseProvider())
