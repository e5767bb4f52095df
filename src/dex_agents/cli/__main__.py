"""``python -m dex_agents.cli``: the same as the ``dex-agents`` command."""

from dex_agents.cli.app import main

if __name__ == "__main__":
    raise SystemExit(main())
