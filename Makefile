# Two commands for a newcomer: `make demo` (set up, run the main job) and `make test`.
# Each creates the virtual environment from pyproject.toml on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test unit lint install dev clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.dev-installed: pyproject.toml plugin/pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	# The MLflow run-context plugin is its own small distribution (mlflow-skinny only).
	$(BIN)/python -m pip install --quiet ./plugin
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
dev: $(VENV)/.dev-installed

# The main job end to end: a local MLflow server, a seeded history, the nightly pass, the
# accuracy table and a calibrated estimate (demo/__main__.py). Needs the dev extra (the
# MLflow server); everything it starts is stopped and .demo/ removed at the end.
demo: $(VENV)/.dev-installed
	$(BIN)/python -m demo

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check service migrations tests bench demo plugin
	$(BIN)/ruff format --check service migrations tests bench demo plugin
	$(BIN)/mypy
	$(BIN)/lint-imports

# Worker processes for the suite (pytest-xdist). It waits on servers and subprocesses more
# than it computes, so three beat two on a 2-core machine (bench/README.md, "Test suite").
# TEST_WORKERS=0 runs it in one process. The 15 slowest tests are listed at the end (the
# aim is .ci/run under 10 minutes: 7 min 1 s on a quiet machine on 2026-12-03 with 1,378
# tests, pytest 337 s, the rest the venv's install and the lint; bench/README.md, "Test suite").
TEST_WORKERS ?= 3

test: lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal --durations=15

# The unit suite alone (pure logic and fakes of our own ports; no servers): seconds.
unit: $(VENV)/.dev-installed
	$(BIN)/python -m pytest tests/unit

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
