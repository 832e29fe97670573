# Wakeline: `make demo` runs the main job, `make test` the whole suite. Both set up
# everything they need on a fresh machine: packages, venv, broker, database, topics, schema.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
export WAKELINE_ROOT := $(CURDIR)
# The suite's own names (issue 13): its topics, consumer groups and transactional ids start
# with TEST_TOPIC_PREFIX and its database is TEST_DATABASE, so `make test` never reads,
# writes, joins or fences what `make demo` runs. The demo keeps the defaults (prefix
# `wakeline`, database `wakeline`).
TEST_TOPIC_PREFIX ?= wakeline-test
TEST_DATABASE ?= wakeline_test
TEST_NAMES := WAKELINE_TOPIC_PREFIX=$(TEST_TOPIC_PREFIX) WAKELINE_POSTGRES_DATABASE=$(TEST_DATABASE)
# The benchmarks' and chaos runs' own names, likewise: a `make bench` creates thousands of
# sessions and a million-event audit load, which the demo's console and audit queries must not
# show, and the demo's backlog must not stand in a measurement's way. `python -m bench.…` run by
# hand defaults to them too (bench/__init__.py).
BENCH_TOPIC_PREFIX ?= wakeline-bench
BENCH_DATABASE ?= wakeline_bench
BENCH_NAMES := WAKELINE_TOPIC_PREFIX=$(BENCH_TOPIC_PREFIX) WAKELINE_POSTGRES_DATABASE=$(BENCH_DATABASE)

.PHONY: help deps venv up test-up bench-up down status lint test unit integration demo demo-harness bench bench-cost chaos chaos-brains cluster-up cluster-down cluster-status

help:
	@echo "make demo   run an agent session end to end on the local stack"
	@echo "make demo-harness   a session whose tool your own harness answers; the harness is killed mid-call"
	@echo "make test   install, start the stack, lint, run the whole suite (topics wakeline-test.*, db wakeline_test)"
	@echo "make lint   ruff on libs, services, tests and bench; mypy (strict) on libs"
	@echo "make up / make down / make status   the local stack (Kafka + Postgres; passwords in .data/credentials.env)"
	@echo "make bench  print measured figures as JSON lines (topics wakeline-bench.*, db wakeline_bench)"
	@echo "make bench-cost   where a tool step's CPU goes: every process, Kafka requests, Postgres statements, flame graphs (~3 min)"
	@echo "make chaos  ~100 random kill -9 of brains, runners and the archiver under load; prints the figures"
	@echo "make chaos-brains   a brain killed every ~5 s for 2 minutes, replaced under its name, then under a new one (~6 min)"
	@echo "make cluster-up / cluster-down / cluster-status   three KRaft brokers (topics wakeline-cluster.*, replication 3); see docs/cluster.md"

deps:
	@bash deploy/system-deps.sh

# The client (clients/python) is a dependency of the project that no index has: pip finds it here.
# bench.dbos_peer's DBOS is no dependency: it gets a venv of its own, pinned there.
$(VENV)/.installed: pyproject.toml clients/python/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e clients/python -e '.[test]'
	@$(PY) -m bench.dbos_peer venv >/dev/null
	@touch $@

venv: $(VENV)/.installed

up: deps venv
	@bash deploy/kafka/kafka.sh up
	@bash deploy/postgres/pg.sh up
	@$(VENV)/bin/wakeline migrate
	@$(VENV)/bin/wakeline topics
	@$(VENV)/bin/wakeline acls

# The suite's database (created, migrated), topics and ACLs, beside the demo's on the same stack.
test-up: up
	@export $(TEST_NAMES); bash deploy/postgres/pg.sh up && $(VENV)/bin/wakeline migrate \
	  && $(VENV)/bin/wakeline topics && $(VENV)/bin/wakeline acls

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
	@rc=0; $(VENV)/bin/ruff check libs services tests bench examples clients/python clients/openapi_snapshot.py || rc=1; $(VENV)/bin/mypy || rc=1; exit $$rc

# The suite runs its own services under its own names; the demo's may keep running.
# --durations: the slowest tests in every run's output, to keep the suite's wall time in view.
test: test-up lint
	@export $(TEST_NAMES); start=$$(date +%s); \
	$(PY) -m pytest -q -p no:cacheprovider --durations=20 tests; rc=$$?; \
	echo "make test: suite wall time $$(( $$(date +%s) - start ))s"; exit $$rc

unit: venv
	export $(TEST_NAMES); $(PY) -m pytest -q tests/unit

integration: test-up
	export $(TEST_NAMES); $(PY) -m pytest -q tests/integration

# The benchmarks' database (created, migrated), topics and ACLs, beside the demo's and the suite's.
bench-up: up
	@export $(BENCH_NAMES); bash deploy/postgres/pg.sh up && $(VENV)/bin/wakeline migrate \
	  && $(VENV)/bin/wakeline topics && $(VENV)/bin/wakeline acls

demo: up
	@bash deploy/demo.sh

# Your own tools (docs/your-own-tools.md): examples/ledger_harness.py answers a declared tool,
# is killed with kill -9 while a call is pending, and a fresh one answers that call once.
demo-harness: up
	@bash deploy/demo_harness.sh

bench: bench-up
	@bash deploy/services.sh down >/dev/null
	export $(BENCH_NAMES); $(PY) -m bench

# The heavy part of the cost per step (docs/benchmarks.md, "Where the CPU goes"): flame graphs.
bench-cost: bench-up
	@bash deploy/services.sh down >/dev/null
	export $(BENCH_NAMES); $(PY) -m bench.cost

# Runs its own services (2 brains, 2 runners, archiver, gateway). The demo's are stopped here and
# for the benchmarks: under other names they join no group of these, but they would take CPU.
chaos: bench-up
	@bash deploy/services.sh down >/dev/null
	export $(BENCH_NAMES); $(PY) -m bench.chaos

# Issue 37's brain churn, held to its recovery bounds: the replacement under the dead brain's
# name (a supervised restart, a StatefulSet pod), then under a new one. Both run; either failing fails.
chaos-brains: bench-up
	@bash deploy/services.sh down >/dev/null
	@export $(BENCH_NAMES); $(PY) -m bench.chaos --only brains --interval 5 --duration 120 --seed 37; same=$$?; \
	$(PY) -m bench.chaos --only brains --interval 5 --duration 120 --seed 37 --new-names; new=$$?; \
	exit $$(( same || new ))

# Three brokers (deploy/kafka/cluster.sh): topics under their own prefix with replication 3 and
# min.insync.replicas 2, so they never meet the single broker's. Services run against it
# unchanged with `eval "$$(bash deploy/kafka/cluster.sh env)"` (docs/cluster.md, "Three brokers on one machine").
CLUSTER_NAMES = $$(bash deploy/kafka/cluster.sh env)
cluster-up: deps venv
	@bash deploy/postgres/pg.sh up >/dev/null && $(VENV)/bin/wakeline migrate
	@bash deploy/kafka/cluster.sh up
	@eval "$(CLUSTER_NAMES)"; $(VENV)/bin/wakeline topics && $(VENV)/bin/wakeline acls

cluster-down:
	@bash deploy/kafka/cluster.sh down

cluster-status:
	@bash deploy/kafka/cluster.sh status || true
