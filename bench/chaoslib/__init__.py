"""The parts of bench/chaos.py (`make chaos`), the run's entry point.

common.py      the run's constants and small helpers (log, free ports, waiting, percentiles)
servers.py     PostgreSQL and Redis from the environment, and how to restart exactly those
receivers.py   the webhook receivers that verify and record every delivery
deployment.py  the web, worker and watcher processes: start, signal, kill, stop
transport.py   the clients' HTTP transport: round-robin over the web processes, answers recorded
state.py       what the load and the faults record while the run goes on
base.py        the run's set-up: S3, the receivers, the deployment, accounts, clients
load.py        the load: users, reviewers, bookings and the usage sampler
faults.py      the fault plan and the injectors
checks.py      the invariants and the figures, read after the drain
run.py         the run: set-up, load under faults, drain, report, clean-up
"""
