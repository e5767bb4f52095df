"""The ``dex-agents`` command line.

Sub-commands:

- ``demo``: the main job. Until the order-agent demo lands it says so and
  prints how to run the test suite.
- ``dev-server``: starts fake Dex on a loopback port for Workers and Clients.
"""

import argparse
import sys
from collections.abc import Sequence

_DEMO_PENDING = (
    "dex-agents demo: the order-agent demo is not built yet.\n"
    "Run the whole test suite with:  make check\n"
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    parser = argparse.ArgumentParser(prog="dex-agents", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="run the demo session")
    args = parser.parse_args(argv)
    assert args.command == "demo"
    sys.stdout.write(_DEMO_PENDING)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
