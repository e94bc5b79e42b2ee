# The two commands of the quick start: `make serve` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: serve test check format clean chromium dovecot screenshots

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

# The browser tests drive Debian's Chromium. Install it when it is missing and we may (root);
# otherwise those tests skip and say how to install it.
chromium:
	@if ! command -v chromium >/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else \
			echo "Chromium is missing: browser tests will skip (apt-get install -y chromium)."; \
		fi; \
	fi

# The IMAP sources' tests run a real Dovecot on a loopback port (tests/imap_server.py).
dovecot:
	@if [ ! -x /usr/sbin/dovecot ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dovecot-imapd >/dev/null; \
		else \
			echo "Dovecot is missing: IMAP tests will skip (apt-get install -y dovecot-imapd)."; \
		fi; \
	fi

serve: $(VENV)/.installed
	$(BIN)/subspace serve

# One pytest-xdist worker per core, each with its own embedded Postgres (tests/conftest.py).
# PYTHONDONTWRITEBYTECODE, when the environment sets it, keeps pytest from caching the test
# modules it rewrites for their assertions: every worker would rewrite them all (~4 s each).
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n auto

test: $(VENV)/.installed-dev chromium dovecot
	$(PYTEST)

check: $(VENV)/.installed-dev chromium dovecot
	$(BIN)/ruff format --check src tests
	$(BIN)/ruff check src tests
	$(BIN)/mypy src
	$(PYTEST)

# docs/screenshots/: the palette, a page and the explain view, light and dark.
screenshots: $(VENV)/.installed-dev chromium
	$(BIN)/python scripts/screenshots.py

format: $(VENV)/.installed-dev
	$(BIN)/ruff format src tests
	$(BIN)/ruff check --fix src tests

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
