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

.PHONY: demo console chat-example check lint test unit integration sagent lint-sagent bench bench-peers clean chromium node-deps

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

# Every extra (pydantic-ai, cli): the demo, the CLI tests and the adapter's tests need them all.
$(VENV)/.synced: $(UV) pyproject.toml uv.lock
	$(UV) sync --locked --all-extras --quiet --python $(PYTHON)
	touch $@

demo: $(VENV)/.synced
	$(BIN)/dex-agents demo $(ARGS)

# The web console on the demo (the dev server and the order agent in-process): http://127.0.0.1:8810
console: $(VENV)/.synced
	$(BIN)/dex-agents console --demo $(ARGS)

# The example chat page on `dex-agents serve --demo` (fake Dex, the order agent): http://127.0.0.1:8820
chat-example: $(VENV)/.synced node-deps
	$(BIN)/dex-agents serve --demo --static examples/chat $(ARGS)

# The pinned AI SDK client (`ai` 7.x) from examples/chat's committed package-lock.json: the example page loads
# it, and the chat backend's tests drive it from Node. No Node.js or npm fails here rather than skip those tests.
CHAT := examples/chat
$(CHAT)/node_modules/.package-lock.json: $(CHAT)/package.json $(CHAT)/package-lock.json
	@command -v node >/dev/null && command -v npm >/dev/null || { echo "make: node and npm are needed" \
		"(the chat backend's tests drive the AI SDK client in Node)" >&2; exit 1; }
	cd $(CHAT) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

node-deps: $(CHAT)/node_modules/.package-lock.json

lint: $(VENV)/.synced
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(VENV)/.synced
	$(BIN)/pytest tests/unit -q

integration: $(VENV)/.synced chromium node-deps
	$(BIN)/pytest tests/integration -q $(PYTEST_PARALLEL)

# Three pytest-xdist workers on two cores: many engine-backed cases wait (long polls, Timers, child processes
# starting) rather than compute. worksteal: a module's cases start together on one worker (its shared stack is
# built once), and an idle worker takes cases from a busy one, so a module of slow CLI cases is not one worker's.
TEST_WORKERS ?= 3
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist worksteal

test: $(VENV)/.synced chromium node-deps
	$(BIN)/pytest -q --durations=10 $(PYTEST_PARALLEL)

# The web console's browser tests drive Debian's Chromium (Playwright never downloads a browser):
# installed from apt when missing (CI runs as root on a fresh machine).
chromium:
	@command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq chromium >/dev/null)

check: lint test sagent

# The sagent adapter (dex-agents[sagent]): sagent 0.1.20 needs Python >= 3.13 here (`import sagent.tools` fails on
# 3.12.1), so its code is checked and its tests (tests/sagent) run in a second env from the same lock, built with the
# first Python 3.13+ found: $(SAGENT_PYTHON), else python3.13/python3.14 on PATH, else ~/.pyenv/versions/3.1[3-9].*.
# No such interpreter fails `make check` rather than skipping the tests.
SAGENT_VENV := .venv-sagent
SAGENT_BIN := $(SAGENT_VENV)/bin
SAGENT_PYTHON ?= $(shell for c in python3.13 python3.14 $(wildcard $(HOME)/.pyenv/versions/3.1[3-9].*/bin/python3.1[3-9]); do \
	"$$c" -c 'import sys; sys.exit(sys.version_info < (3, 13))' >/dev/null 2>&1 && { command -v "$$c"; break; }; done)

$(SAGENT_VENV)/.synced: $(UV) pyproject.toml uv.lock
	@test -n "$(SAGENT_PYTHON)" || { echo "make: no Python 3.13+ interpreter found (python3.13 on PATH or" \
		"~/.pyenv/versions/3.13.*): the sagent adapter's tests need one; set SAGENT_PYTHON=/path/to/python3.13" >&2; exit 1; }
	UV_PROJECT_ENVIRONMENT=$(SAGENT_VENV) $(UV) sync --locked --all-extras --quiet --python $(SAGENT_PYTHON)
	touch $@

lint-sagent: $(SAGENT_VENV)/.synced
	$(SAGENT_BIN)/mypy --python-version 3.13 $(wildcard src/dex_agents/adapters/sagent/*.py) $(wildcard tests/sagent/*.py) \
		src/dex_agents/cli/sagent_order_agent.py

sagent: $(SAGENT_VENV)/.synced lint-sagent
	DEX_AGENTS_REQUIRE_SAGENT=1 $(SAGENT_BIN)/pytest tests/sagent -q

# `make bench` runs the peer benchmark (bench-peers), then the binding benchmarks.
bench: $(VENV)/.synced bench-peers
	$(BIN)/python -m benchmarks

# The peer benchmark needs DBOS and Temporal: its own venv, so `make check` stays light. The
# project's locked versions constrain the peers' install (same pydantic-ai, pydantic, protobuf...).
BENCH_VENV := .bench-venv
PEERS := benchmarks/peers

$(BENCH_VENV)/.synced: $(UV) pyproject.toml uv.lock $(PEERS)/requirements.txt
	UV_PROJECT_ENVIRONMENT=$(BENCH_VENV) $(UV) sync --locked --all-extras --no-dev --quiet --python $(PYTHON)
	$(UV) export --locked --all-extras --no-dev --no-hashes --no-emit-project --quiet -o $(BENCH_VENV)/constraints.txt
	$(UV) pip install --quiet --python $(BENCH_VENV)/bin/python -r $(PEERS)/requirements.txt \
		-c $(BENCH_VENV)/constraints.txt
	touch $@

# Side by side with Pydantic AI plain / DBOS / Temporal (5-8 min); writes $(PEERS)/results/latest.md.
bench-peers: $(BENCH_VENV)/.synced
	$(BENCH_VENV)/bin/python -m benchmarks.peers.bench --out $(PEERS)/results $(ARGS)

clean:
	rm -rf $(TOOLS) $(VENV) $(SAGENT_VENV) $(BENCH_VENV) .bench-out .mypy_cache .pytest_cache .ruff_cache \
		$(CHAT)/node_modules
