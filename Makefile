# Two commands for a newcomer: `make demo` (set up, run the main job) and `make test`.
# Each creates the virtual environment from pyproject.toml on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint install dev clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
dev: $(VENV)/.dev-installed

EXAMPLE := --params 7e9 --tokens 1e12 --gpu a100-80gb --precision bf16 --recompute full --utilization 0.4

demo: $(VENV)/.installed
	$(BIN)/reckon estimate $(EXAMPLE) --gpus 8
	$(BIN)/reckon plan $(EXAMPLE) --deadline 3.5d --whole-nodes
	$(BIN)/reckon sensitivity $(EXAMPLE) --gpus 8

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check service tests bench migrations
	$(BIN)/ruff format --check service tests bench migrations
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
