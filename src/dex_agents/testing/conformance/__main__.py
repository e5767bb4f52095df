"""``python -m dex_agents.testing.conformance --server HOST:PORT``."""

from dex_agents.testing.conformance._probe import main

if __name__ == "__main__":
    raise SystemExit(main())
