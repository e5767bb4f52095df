# The two set-up commands of the README: `make demo` and `make check`.
# Each creates its own virtual environment from the lock file; nothing needs
# to be installed beforehand but Python 3.11+ and make.
PYTHON ?= python3
UV_VERSION := 0.13.9
TOOLS := .tools
VENV := .venv
UV := $(TOOLS)/bin/uv
BIN := $(VENV)/bin
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(VENV)

.PHONY: demo check lint test unit integration bench clean

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

$(VENV)/.synced: $(UV) pyproject.toml uv.lock
	$(UV) sync --locked --quiet --python $(PYTHON)
	touch $@

demo: $(VENV)/.synced
	$(BIN)/dex-agents demo $(ARGS)

lint: $(VENV)/.synced
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(VENV)/.synced
	$(BIN)/pytest tests/unit -q

integration: $(VENV)/.synced
	$(BIN)/pytest tests/integration -q

test: $(VENV)/.synced
	$(BIN)/pytest -q --durations=10

check: lint test

bench: $(VENV)/.synced
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(TOOLS) $(VENV) .mypy_cache .pytest_cache .ruff_cache
