"""The `web` process's gunicorn worker: request heads and bodies are read by an event loop, and
only a complete request reaches a thread that runs the Django (WSGI) application.

- `worker.Worker` (set as `worker_class` in config/gunicorn.py): gunicorn's own asyncio worker,
  so the master, its hooks, limits, logging and graceful stop stay gunicorn's.
- `accept`: the worker reads the shared listening socket only while its thread is free, one
  connection at a time, so that a request never waits behind a busy worker while another is free.
- `protocol.Protocol`: gunicorn's HTTP/1 protocol with a total deadline for a request head
  (`REQUEST_HEADER_TIMEOUT`) and the API's JSON error body for what the parser refuses.
- `heads`: what the head alone decides (an absolute-form target's path, `Host`, `Expect`, the
  body limit of the route and whether a credential is presented).
- `body`: reads the body on the loop (a minimum average rate, the route's size limit, spooled to
  disk past 1 MiB, charged to the worker's spool budget).
- `bridge.WsgiBridge`: then runs the WSGI application in a fixed pool of threads, whose database
  connections persist as in a sync worker.
"""
