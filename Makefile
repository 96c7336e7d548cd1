# Yoyaku: `make run` and `make test` are all a fresh machine needs (Python 3.11).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# What `make run` needs (the server and the client) and, on top, the test and lint toolchain.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
PIP := $(BIN)/python -m pip install --disable-pip-version-check
PORT ?= 8000
# Relative webhook paths of schedule plans call the platform itself: the server `make run`
# starts, on whatever PORT it serves (set it in the environment to call another one).
SCHEDULE_WEBHOOK_BASE_URL ?= http://127.0.0.1:$(PORT)
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: help install run migrate test test-postgres lint format bench chaos clean reset schema-check

help:
	@echo "make run    - install, migrate, create demo accounts, start web + worker + watcher"
	@echo "make test   - the test suite (SQLite; PostgreSQL/Redis when DATABASE_URL/REDIS_URL are set;"
	@echo "              PYTEST_WORKERS=auto: one process per core)"
	@echo "make lint   - ruff check, ruff format --check, mypy"
	@echo "make bench  - the benchmarks in bench/ (BENCH=upload to run one)"
	@echo "make schema-check TOKEN=... - Schemathesis against the running server (make run)"
	@echo "make chaos  - web/worker/watcher x2 on PostgreSQL + Redis + S3 under faults (CHAOS_MINUTES=10)"
	@echo "make reset  - delete the database and uploaded files of make run"

$(RUN_STAMP): requirements/base.txt requirements/client.txt client/pyproject.toml
	@echo "== Installing what the server needs into $(VENV) (first run only; about a minute)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) --quiet --upgrade pip
	$(PIP) --progress-bar on -r requirements/base.txt -r requirements/client.txt
	$(PIP) --no-deps -e ./client
# The client's byte code, once (an editable install has none, and PYTHONDONTWRITEBYTECODE
# would make every `yoyaku` start compile ~45 modules again: +0.15 s CPU per command).
	$(BIN)/python -m compileall -q client/yoyaku_client
	touch $(RUN_STAMP)

$(DEV_STAMP): $(RUN_STAMP) requirements/dev.txt
	@echo "== Installing the test and lint toolchain into $(VENV) (first time only)"
	$(PIP) --progress-bar on -r requirements/dev.txt
	touch $(DEV_STAMP)

install: $(DEV_STAMP)

migrate: $(RUN_STAMP)
	DEBUG=$${DEBUG:-true} $(BIN)/python manage.py migrate --noinput

run: migrate
	DEBUG=$${DEBUG:-true} $(BIN)/python manage.py collectstatic --noinput --verbosity 0
	DEBUG=$${DEBUG:-true} $(BIN)/python manage.py bootstrap
	-DEBUG=$${DEBUG:-true} $(BIN)/python manage.py apply_bundle examples/benchmarks/digits --user admin
	DEBUG=$${DEBUG:-true} $(BIN)/python manage.py metrics_clean
	@echo
	@echo "  API:     http://127.0.0.1:$(PORT)/api/   (Authorization: Bearer <token above>)"
	@echo "  Docs:    http://127.0.0.1:$(PORT)/api/docs/"
	@echo "  Admin:   http://127.0.0.1:$(PORT)/admin/   (admin / password above)"
	@echo "  Pages:   http://127.0.0.1:$(PORT)/submit/  /jobs/  /leaderboard/  /review/"
	@echo "           http://127.0.0.1:$(PORT)/challenges/  (benchmarks: docs/benchmarks-guide.md)"
	@echo "  Health:  http://127.0.0.1:$(PORT)/healthz   Metrics: /metrics   Ops: /ops/"
	@echo "  Client:  $(BIN)/yoyaku login --url http://127.0.0.1:$(PORT) --token <demo token above>"
	@echo "           $(BIN)/yoyaku submit examples/hello --wait"
	@echo
	DEBUG=$${DEBUG:-true} PORT=$(PORT) SCHEDULE_WEBHOOK_BASE_URL='$(SCHEDULE_WEBHOOK_BASE_URL)' \
		$(BIN)/honcho -f Procfile.dev start

# One process by default; PYTEST_WORKERS=auto (or 2) runs the suite on pytest-xdist workers,
# each with its own test database, task queue and metrics folder (docs/decisions.md: not yet
# the default).
PYTEST_WORKERS ?= 0
test: $(DEV_STAMP)
	$(BIN)/pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .

format: $(DEV_STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# QUICK=1: every script with tiny sizes, only checking that each still runs (CI runs it).
bench: $(DEV_STAMP)
	$(BIN)/python bench/run_all.py $(BENCH) $(if $(QUICK),--quick)

# Every Schemathesis check, all phases, against a live server (it writes to that server's
# database: use a demo or throw-away one). TOKEN is a user's API token (make run prints some).
schema-check: $(DEV_STAMP)
	@test -n "$(TOKEN)" || { echo "usage: make schema-check TOKEN=<api token> [PORT=8000]"; exit 2; }
	$(BIN)/schemathesis --config-file schemathesis.toml run \
		http://127.0.0.1:$(PORT)/api/schema/ -H "Authorization: Bearer $(TOKEN)"
# Scale-out proof (docs/deploy.md): DATABASE_URL / REDIS_URL name the servers it may restart
# (default 127.0.0.1:5432 and :6379); CHAOS_ARGS adds options (--seed S, --ci).
CHAOS_MINUTES ?= 10
chaos: $(DEV_STAMP)
	$(BIN)/python bench/chaos.py --minutes $(CHAOS_MINUTES) $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) .test-db.sqlite3* .test-media .pytest_cache .mypy_cache .ruff_cache staticfiles

# The runtime state of `make run`: its database and every uploaded file.
reset:
	rm -rf db.sqlite3* media
