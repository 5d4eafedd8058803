# Set-up and checks. `make demo` and `make test` work on a fresh machine:
# each creates the virtual environment it needs first.

SHELL := /bin/bash
.DEFAULT_GOAL := help

# Newest CPython found among 3.13, 3.12 and 3.11, also where pyenv keeps
# versions that are not its global one.
PYTHON ?= $(shell for v in 3.13 3.12 3.11; do \
	  for c in python$$v $$HOME/.pyenv/versions/$$v*/bin/python$$v; do \
	    p=$$($$c -c 'import sys; print(sys.executable)' 2>/dev/null) && { echo $$p; exit 0; }; \
	  done; done; echo python3)
VENV ?= .venv
# A pip requirement for Django, e.g. DJANGO='django>=5.2,<5.3'; empty: newest.
DJANGO ?=
BIN := $(VENV)/bin
# One stamp per extra installed into the venv: test, docs, bench, dist.
STAMP := $(VENV)/.installed-test
# mypy's Django plugin imports the test settings; a URL keeps them from
# starting a server.
TYPECHECK_ENV := DATABASE_URL=postgres://localhost/typecheck

.PHONY: help venv test test-fast lint typecheck pytest pgbouncer failover demo serve bench stress docs dist clean schema-reference

help:
	@echo "make demo   run the main job on an embedded PostgreSQL"
	@echo "make test   lint, type-check and run the test suite"
	@echo "make test-fast   the quick tier: memory queue, no database (seconds)"
	@echo "make pgbouncer   the PgBouncer suite (transaction mode), on DATABASE_URL's server"
	@echo "make failover   claims and workers across pg_auto_failover failovers"
	@echo "make bench  run the benchmarks"
	@echo "make docs   build the documentation"
	@echo "make dist   build the sdist and wheel"

$(VENV)/.installed-%: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[$*]' $(if $(DJANGO),'$(DJANGO)')
	@$(BIN)/python -c 'import sys, django; print("Python", sys.version.split()[0], "Django", django.get_version())'
	@touch $@

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(TYPECHECK_ENV) $(BIN)/mypy

test-fast: $(STAMP)
	$(BIN)/pytest -q -m fast $(PYTEST_ARGS)

pytest: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

test: lint typecheck pytest

# The schema a fresh migrate builds, astral_taskclaim/db/sql/schema_reference.sql
# (PostgreSQL 17+; the embedded server unless DATABASE_URL is set).
schema-reference: $(STAMP)
	$(BIN)/python -m tests.tools.schema_reference

demo: $(STAMP)
	$(BIN)/python example_project/demo.py

serve: $(STAMP)
	$(BIN)/python example_project/serve.py

bench: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks $(BENCH_ARGS)

# The suite through PgBouncer (transaction mode, 127.0.0.1:16432) in front
# of DATABASE_URL's server; needs the pgbouncer binary (Debian: pgbouncer).
pgbouncer: $(STAMP)
	$(BIN)/pytest tests/pgbouncer $(PYTEST_ARGS)

# Claimed enqueues and workers across failovers of a pg_auto_failover
# cluster (127.0.0.1:16601-16603); needs Debian's postgresql-15-auto-failover.
# FAILOVERS=6 for a longer run (alternately planned and unplanned);
# FAILOVER_ASYNC=0 skips the measurement without synchronous replication.
FAILOVERS ?= 2
FAILOVER_ASYNC ?= 1
failover: $(STAMP)
	TASKCLAIM_FAILOVERS=$(FAILOVERS) TASKCLAIM_FAILOVER_ASYNC=$(FAILOVER_ASYNC) \
	  $(BIN)/pytest tests/failover -s $(PYTEST_ARGS)

stress: $(STAMP)
	TASKCLAIM_STRESS=1 $(BIN)/pytest tests/reliability $(PYTEST_ARGS)

docs: $(VENV)/.installed-docs
	$(BIN)/sphinx-build --fail-on-warning --keep-going --quiet -b html docs docs/_build/html
	@echo "docs: docs/_build/html/index.html"

dist: $(VENV)/.installed-dist
	rm -rf dist
	$(BIN)/python -m build --no-isolation --outdir dist .
	@ls -l dist

clean:
	rm -rf .venv .venv-* .pgdata* dist build .mypy_cache .ruff_cache .pytest_cache
