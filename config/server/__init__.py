"""The `web` process's gunicorn worker: request heads and bodies are read by an event loop, and
only a complete request reaches a thread that runs the Django (WSGI) application.

- `worker.Worker` (set as `worker_class` in config/gunicorn.py): gunicorn's own asyncio worker,
  so the master, its hooks, limits, logging and graceful stop stay gunicorn's.
- `protocol.Protocol`: gunicorn's HTTP/1 protocol with a total deadline for a request head
  (`REQUEST_HEADER_TIMEOUT`) and the API's JSON error body for what the parser refuses.
- `bridge.WsgiBridge`: reads the body on the loop (a minimum average rate, a size cap, spooled
  to disk past 1 MiB), then runs the WSGI application in a fixed pool of threads, whose database
  connections persist as in a sync worker.
"""
