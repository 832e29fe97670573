# Wakeline: `make demo` runs the main job, `make test` the whole suite. Both set up
# everything they need on a fresh machine: packages, venv, broker, database, topics, schema.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
export WAKELINE_ROOT := $(CURDIR)

.PHONY: help deps venv up down status lint test unit integration demo bench chaos

help:
	@echo "make demo   run an agent session end to end on the local stack"
	@echo "make test   install, start the stack, lint, run the whole suite"
	@echo "make lint   ruff on libs, services, tests and bench; mypy (strict) on libs"
	@echo "make up / make down / make status   the local stack (Kafka + Postgres; passwords in .data/credentials.env)"
	@echo "make bench  print measured figures as JSON lines"
	@echo "make chaos  ~100 random kill -9 of brains, runners and the archiver under load; prints the figures"

deps:
	@bash deploy/system-deps.sh

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

venv: $(VENV)/.installed

up: deps venv
	@bash deploy/kafka/kafka.sh up
	@bash deploy/postgres/pg.sh up
	@$(PY) -m wakeline.migrate
	@$(PY) -m wakeline.admin topics
	@$(PY) -m wakeline.admin acls

down:
	@bash deploy/services.sh down 2>/dev/null || true
	@bash deploy/kafka/kafka.sh down
	@bash deploy/postgres/pg.sh down

status:
	@bash deploy/kafka/kafka.sh status || true
	@bash deploy/postgres/pg.sh status || true
	@bash deploy/services.sh status || true

# Both tools run even when the first finds something, so one run lists every finding.
lint: venv
	@rc=0; $(VENV)/bin/ruff check libs services tests bench || rc=1; $(VENV)/bin/mypy || rc=1; exit $$rc

# The suite runs its own services; demo ones would join the same consumer groups.
test: up lint
	@bash deploy/services.sh down >/dev/null
	@start=$$(date +%s); \
	$(PY) -m pytest -q -p no:cacheprovider tests; rc=$$?; \
	echo "make test: suite wall time $$(( $$(date +%s) - start ))s"; exit $$rc

unit: venv
	$(PY) -m pytest -q tests/unit

integration: up
	$(PY) -m pytest -q tests/integration

demo: up
	@bash deploy/demo.sh

bench: up
	@bash deploy/services.sh down >/dev/null
	$(PY) -m bench

# Runs its own services (2 brains, 2 runners, archiver, gateway); demo ones would join their groups.
chaos: up
	@bash deploy/services.sh down >/dev/null
	$(PY) -m bench.chaos
