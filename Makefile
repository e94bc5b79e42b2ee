# The two commands of the quick start: `make serve` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: serve test check format clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Stamp files make a second `make` skip the install when pyproject.toml has not changed.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

serve: $(VENV)/.installed
	$(BIN)/subspace serve

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q

check: $(VENV)/.installed-dev
	$(BIN)/ruff format --check src tests
	$(BIN)/ruff check src tests
	$(BIN)/mypy src
	$(BIN)/python -m pytest -q

format: $(VENV)/.installed-dev
	$(BIN)/ruff format src tests
	$(BIN)/ruff check --fix src tests

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
