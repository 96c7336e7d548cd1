"""Registrations of the benchmarks app (imported from `BenchmarksConfig.ready()`): what the
apps below it call through their registries without importing this app."""

from __future__ import annotations

from apps.benchmarks.services.storage import KIND as ORPHAN_BUNDLES
from apps.benchmarks.services.storage import stored_bundles_cleanup
from apps.core.cleanup import register_cleanup

register_cleanup(
    ORPHAN_BUNDLES,
    "stored bundles no challenge or scoring version names (a web process killed mid-apply), "
    "older than STORED_ORPHAN_GRACE_MINUTES",
)(stored_bundles_cleanup)
