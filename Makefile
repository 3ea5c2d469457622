# Two commands do all setup on a fresh machine:
#   make run   - virtualenv, install, migrate, demo data, then the site on 127.0.0.1:8000
#                with a django-q2 worker cluster and the timer sweeper (Ctrl-C, or SIGINT or
#                SIGTERM sent to make alone, stops all within 10 s)
#   make test  - virtualenv if missing, then the whole test suite
# make docs builds the documentation site into site/ (mkdocs.yml, --strict);
# and, while editing, make test-fast: the tests that need no extra process or browser;
# make test-matrix runs the suite on the other supported Pythons and Djangos
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test test-fast test-postgres test-matrix lint docs bench clean

# pytest-xdist: one pytest worker per core, at most four (PYTEST_WORKERS=0 runs in one
# process). The tests that start real processes run one after another on one worker, the
# in-process tests beside them (tests/conftest.py).
PYTEST_WORKERS ?= auto
XDIST = -n $(PYTEST_WORKERS) --maxprocesses=4 --dist loadgroup

$(STAMP): requirements.txt requirements-test.txt requirements-docs.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py demo_setup
	@echo "Flowsite demo: http://$(HOST):$(PORT)/admin/  (login: admin / admin)"
	@echo "Workers: workflows_worker (django-q2 cluster) + workflows_sweeper + label_printer (external, queue labels; service account label-printer, API token demo-label-printer-token). Ctrl-C stops everything within 10 s."
	@# exec: make's SIGTERM must reach the supervisor itself, not a shell in between. make
	@# does not pass on a SIGINT sent to it alone: the supervisor sees it in make (parent_watch).
	exec $(BIN)/python manage.py demo_run --host $(HOST) --port $(PORT)

test: $(STAMP)
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

# Leaves out tests/acceptance, tests/browser and tests/install (real processes, Chromium,
# a fresh project), every test marked `processes` (one that starts a process elsewhere) and
# the few marked `slow` (scale and fuzz tests: half of the rest's time in five tests).
test-fast: $(STAMP)
	$(BIN)/python -m pytest $(XDIST) -m "not acceptance and not browser and not processes and not slow" \
		--ignore=tests/acceptance --ignore=tests/browser --ignore=tests/install $(PYTEST_ARGS)

test-postgres: $(STAMP)
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test} $(BIN)/python -m pytest $(XDIST) \
		$(PYTEST_ARGS)

# The suite on SQLite on every other supported Python and Django (noxfile.py): one
# virtualenv each under .nox/, the app installed from its own ranges. One combination:
#   .venv/bin/nox -s "tests(python='3.12', django='6.1')"
test-matrix: $(STAMP)
	$(BIN)/nox $(NOX_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The documentation site (mkdocs.yml) into site/; --strict fails on any warning: a broken
# link or anchor, a page missing from the navigation, a reference that no longer imports.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(STAMP)
	$(BIN)/python bench/throughput.py

.PHONY: bench-workers
bench-workers: $(STAMP)
	$(BIN)/python bench/workers.py --database $${BENCH_DATABASE:-both}

clean:
	rm -rf $(VENV) .nox var site .pytest_cache .ruff_cache .mypy_cache
