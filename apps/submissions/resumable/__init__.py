"""Resumable uploads (SPEC §11.5): an upload's bytes arrive over several requests in either of
two protocols (the IETF draft and tus 1.0.0); the submissions app owns them because they end
as submission files (a bundle apply in the benchmarks app consumes them through the services).

- `digest` — a SHA-256 whose state is saved with the offset and restored on the next request;
- `store` — the bytes on local disk, appended in place and fsynced before an offset is kept;
- `selectors` / `services` — reads, and create, append, delete, attach, expire.
"""
